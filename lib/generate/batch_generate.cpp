// Batched generation (see batch_generate.h).
#include "generate/batch_generate.h"

#include <algorithm>

#include "generate/beam_search.h"
#include "util/error.h"

namespace hftrain {
namespace {

// One prompt's generation in the batch.
struct Row {
  std::size_t index = 0;        // in the caller's prompts
  std::vector<int64_t> tokens;  // the prompt (decoder-only) or the decoder start token, then the generated
  int64_t prompt_length = 0;
  int64_t budget = 0;
  std::vector<int64_t> generated;
};

// The next token of each active row from its scores [rows, V] (host, float), after the processors.
std::vector<int64_t> choose_tokens(torch::Tensor scores, const std::vector<Row*>& active, const GenerationConfig& config,
                                   at::Generator& generator) {
  for (std::size_t i = 0; i < active.size(); ++i) {
    torch::Tensor row = scores.narrow(0, static_cast<int64_t>(i), 1);
    mask_forbidden_tokens(row, {active[i]->tokens}, active[i]->prompt_length, config);
  }
  torch::Tensor picked;
  if (config.do_sample) {
    std::vector<torch::Tensor> warped;
    for (int64_t i = 0; i < scores.size(0); ++i) warped.push_back(warp_logits(scores[i], config));
    picked = torch::multinomial(torch::softmax(torch::stack(warped), -1), 1, /*replacement=*/false, generator).squeeze(1);
  } else {
    picked = scores.argmax(-1);
  }
  picked = picked.contiguous();
  return std::vector<int64_t>(picked.data_ptr<int64_t>(), picked.data_ptr<int64_t>() + picked.numel());
}

// Greedy / sampling over `rows` at once (see the header); every row can use the KV cache.
void generate_together(Model& model, std::vector<Row>& rows, const std::vector<std::vector<int64_t>>& prompts,
                       const GenerationConfig& config, at::Generator& generator) {
  const bool encoder_decoder = model.is_encoder_decoder();
  const torch::Device device = model_device(model);
  std::vector<Row*> active;
  for (auto& r : rows)
    if (r.budget > 0) active.push_back(&r);
  if (active.empty()) return;
  KvCache cache;
  torch::Tensor source, source_mask, logits;
  if (encoder_decoder) {
    std::vector<std::vector<int64_t>> sources;
    for (Row* r : active) sources.push_back(prompts[r->index]);
    std::tie(source, source_mask) = right_padded_sources(sources, device);
    const torch::Tensor start = torch::full({static_cast<int64_t>(active.size()), 1}, model.decoder_start_token_id(),
                                            torch::TensorOptions().dtype(torch::kLong).device(device));
    logits = model.forward_encoder_decoder_cached(source, source_mask, start, cache);
  } else {
    std::vector<std::vector<int64_t>> block;
    for (Row* r : active) block.push_back(r->tokens);
    logits = model.forward_cached(left_padded_prompts(block, cache, device), cache);
  }
  while (!active.empty()) {
    torch::Tensor scores = logits.select(1, logits.size(1) - 1).to(torch::kCPU, torch::kFloat).contiguous();
    const std::vector<int64_t> chosen = choose_tokens(scores, active, config, generator);
    std::vector<int64_t> keep;
    for (std::size_t i = 0; i < active.size(); ++i) {
      Row& r = *active[i];
      r.tokens.push_back(chosen[i]);
      r.generated.push_back(chosen[i]);
      const bool finished = (config.eos_token_id && chosen[i] == *config.eos_token_id) ||
                            static_cast<int64_t>(r.generated.size()) >= r.budget;
      if (!finished) keep.push_back(static_cast<int64_t>(i));
    }
    if (keep.empty()) break;
    std::vector<Row*> still;
    std::vector<int64_t> last, positions;
    for (int64_t i : keep) {
      still.push_back(active[static_cast<std::size_t>(i)]);
      last.push_back(still.back()->tokens.back());
      positions.push_back(static_cast<int64_t>(still.back()->tokens.size()) - 1);  // its index in the unpadded row
    }
    if (keep.size() < active.size()) cache.keep_rows(torch::tensor(keep, torch::kLong));
    active = still;
    const auto n = static_cast<int64_t>(active.size());
    const torch::Tensor input = token_ids_on(last, device).view({n, 1});
    if (encoder_decoder) {
      logits = model.forward_encoder_decoder_cached(source, source_mask, input, cache);
    } else {
      extend_left_padded(cache, positions, device);
      logits = model.forward_cached(input, cache);
    }
  }
}

}  // namespace

std::vector<std::vector<int64_t>> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                 const GenerationConfig& config, at::Generator& generator) {
  validate_generation_config(config);
  if (config.do_sample && config.temperature <= 0)
    throw ConfigError("generation.temperature must be > 0 when do_sample is true");
  std::vector<std::vector<int64_t>> out(prompts.size());
  const bool encoder_decoder = model.is_encoder_decoder();
  std::vector<Row> together;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) throw RuntimeFailure("generate: the prompt is empty (nothing to condition on)");
    Row r;
    r.index = i;
    r.tokens = encoder_decoder ? std::vector<int64_t>{model.decoder_start_token_id()} : prompts[i];
    r.prompt_length = static_cast<int64_t>(r.tokens.size());
    r.budget = new_token_budget(config, r.prompt_length);
    const bool slides = config.max_context > 0 && r.prompt_length + r.budget > config.max_context;
    if (prompts.size() == 1 || (!encoder_decoder && (!model.supports_kv_cache() || slides)))
      out[i] = generate(model, prompts[i], config, generator);  // as it always ran
    else
      together.push_back(std::move(r));
  }
  if (together.empty()) return out;
  torch::NoGradGuard no_grad;
  generate_together(model, together, prompts, config, generator);
  for (auto& r : together) out[r.index] = std::move(r.generated);
  return out;
}

std::vector<std::vector<GeneratedSequence>> generate_sequences_batch(Model& model,
                                                                     const std::vector<std::vector<int64_t>>& prompts,
                                                                     const GenerationConfig& config,
                                                                     at::Generator& generator) {
  validate_generation_config(config);
  std::vector<std::vector<GeneratedSequence>> out;
  if (config.num_beams > 1) return beam_search_batch(model, prompts, config);
  for (auto& tokens : generate_batch(model, prompts, config, generator))
    out.push_back({GeneratedSequence{std::move(tokens), 0.0}});
  return out;
}

}  // namespace hftrain
