// Generation (see generate.h).
#include "generate/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include <cmath>
#include <limits>

#include "generate/beam_search.h"
#include "util/error.h"

namespace hftrain {

at::Generator make_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

torch::Tensor warp_logits(const torch::Tensor& logits_in, const GenerationConfig& config) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto scores = logits_in.to(torch::kFloat);
  if (config.temperature != 1.0) scores = scores / config.temperature;
  if (config.top_k > 0) {
    const int64_t k = std::min<int64_t>(config.top_k, scores.size(-1));
    auto kth = std::get<0>(torch::topk(scores, k, -1)).select(-1, k - 1);
    scores = scores.masked_fill(scores < kth, neg_inf);
  }
  if (config.top_p < 1.0) {
    auto sorted = torch::sort(scores, -1, /*descending=*/false);
    auto sorted_logits = std::get<0>(sorted), sorted_indices = std::get<1>(sorted);
    auto cumulative = torch::softmax(sorted_logits, -1).cumsum(-1);
    auto remove_sorted = cumulative <= (1.0 - config.top_p);
    remove_sorted.select(-1, remove_sorted.size(-1) - 1).fill_(false);  // keep at least one token
    auto remove = torch::zeros_like(remove_sorted).scatter(-1, sorted_indices, remove_sorted);
    scores = scores.masked_fill(remove, neg_inf);
  }
  return scores;
}

int64_t new_token_budget(const GenerationConfig& config, int64_t start_length) {
  if (!config.max_length) return config.max_new_tokens;
  if (*config.max_length <= start_length)  // HF's _validate_generated_length refuses it too
    throw ConfigError("generation.max_length " + std::to_string(*config.max_length) + " leaves no room to generate after " +
                      std::to_string(start_length) + " tokens of " +
                      (start_length == 1 ? "decoder start" : "prompt") + "; raise it or set generation.max_new_tokens");
  return *config.max_length - start_length;
}

void validate_generation_config(const GenerationConfig& c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (c.max_new_tokens < 1) throw ConfigError("generation.max_new_tokens must be >= 1, got " + n(c.max_new_tokens));
  if (c.max_length && *c.max_length < 1) throw ConfigError("generation.max_length must be >= 1, got " + n(*c.max_length));
  if (c.min_length && *c.min_length < 0) throw ConfigError("generation.min_length must be >= 0, got " + n(*c.min_length));
  if (c.min_length && c.max_length && *c.min_length > *c.max_length)
    throw ConfigError("generation.min_length (" + n(*c.min_length) + ") must be <= generation.max_length (" + n(*c.max_length) + ")");
  if (c.num_beams < 1) throw ConfigError("generation.num_beams must be >= 1, got " + n(c.num_beams));
  if (c.num_return_sequences < 1)
    throw ConfigError("generation.num_return_sequences must be >= 1, got " + n(c.num_return_sequences));
  if (c.num_return_sequences > c.num_beams)
    throw ConfigError("generation.num_return_sequences (" + n(c.num_return_sequences) + ") must be <= generation.num_beams (" +
                      n(c.num_beams) + "): beam search returns at most its num_beams best hypotheses" +
                      (c.num_beams == 1 ? "; greedy decoding and sampling return one sequence" : ""));
  if (c.do_sample && c.num_beams > 1)
    throw ConfigError("generation.do_sample with generation.num_beams > 1 (HF's beam sampling) is not built; "
                      "use do_sample: false for beam search or num_beams: 1 for sampling");
  if (c.min_new_tokens < 0) throw ConfigError("generation.min_new_tokens must be >= 0, got " + n(c.min_new_tokens));
  if (c.no_repeat_ngram_size < 0)
    throw ConfigError("generation.no_repeat_ngram_size must be >= 0, got " + n(c.no_repeat_ngram_size));
  if (!std::isfinite(c.length_penalty)) throw ConfigError("generation.length_penalty must be a finite number");
}

void mask_forbidden_tokens(torch::Tensor& scores, const std::vector<std::vector<int64_t>>& rows, int64_t prompt_length,
                           const GenerationConfig& config) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (scores.scalar_type() != torch::kFloat || !scores.is_contiguous()) scores = scores.to(torch::kFloat).contiguous();
  const int64_t vocab = scores.size(-1);
  const auto n = static_cast<std::size_t>(config.no_repeat_ngram_size);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    float* row_scores = scores.data_ptr<float>() + static_cast<int64_t>(r) * vocab;
    // NoRepeatNGram: the last n - 1 tokens followed by any token that followed them before.
    if (n > 0 && row.size() + 1 >= n) {
      const std::size_t prefix_begin = row.size() + 1 - n;
      for (std::size_t i = 0; i + n <= row.size(); ++i)
        if (std::equal(row.begin() + static_cast<std::ptrdiff_t>(i), row.begin() + static_cast<std::ptrdiff_t>(i + n - 1),
                       row.begin() + static_cast<std::ptrdiff_t>(prefix_begin))) {
          const int64_t banned = row[i + n - 1];
          if (banned >= 0 && banned < vocab) row_scores[banned] = neg_inf;
        }
    }
    const auto length = static_cast<int64_t>(row.size());
    const bool eos_in_vocab = config.eos_token_id && *config.eos_token_id >= 0 && *config.eos_token_id < vocab;
    // MinLength: no eos while the whole row is shorter than min_length.
    if (eos_in_vocab && config.min_length && length < *config.min_length) row_scores[*config.eos_token_id] = neg_inf;
    // MinNewTokensLength: no eos before min_new_tokens tokens were generated.
    if (eos_in_vocab && length - prompt_length < config.min_new_tokens) row_scores[*config.eos_token_id] = neg_inf;
    // ForcedBOS at the first decoder position; ForcedEOS at the last position the length limit allows.
    std::optional<int64_t> forced;
    if (config.forced_bos_token_id && length == 1) forced = config.forced_bos_token_id;
    if (config.forced_eos_token_id && length == prompt_length + new_token_budget(config, prompt_length) - 1)
      forced = config.forced_eos_token_id;
    if (forced && *forced >= 0 && *forced < vocab) {
      std::fill(row_scores, row_scores + vocab, neg_inf);
      row_scores[*forced] = 0.0f;
    }
  }
}

int64_t next_token(const torch::Tensor& logits, const GenerationConfig& config, at::Generator& generator) {
  if (!config.do_sample) return logits.argmax(-1).item<int64_t>();
  auto probs = torch::softmax(warp_logits(logits, config), -1);
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator) {
  validate_generation_config(config);
  if (config.do_sample && config.temperature <= 0)
    throw ConfigError("generation.temperature must be > 0 when do_sample is true");
  if (prompt.empty()) throw RuntimeFailure("generate: the prompt is empty (nothing to condition on)");
  torch::NoGradGuard no_grad;
  // An encoder-decoder model reads the prompt with its encoder (once); the decoder's tokens start with
  // the decoder start token, which plays the prompt's part for the processors.
  const bool encoder_decoder = model.is_encoder_decoder();
  const torch::Device device = model_device(model);
  const torch::Tensor source = token_ids_on(prompt, device).unsqueeze(0);
  std::vector<int64_t> tokens = encoder_decoder ? std::vector<int64_t>{model.decoder_start_token_id()} : prompt;
  const auto prompt_length = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> generated;
  KvCache cache;
  const int64_t budget = new_token_budget(config, prompt_length);
  for (int64_t i = 0; i < budget; ++i) {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t begin = !encoder_decoder && config.max_context > 0 && n > config.max_context ? n - config.max_context : 0;
    torch::Tensor logits;
    if (encoder_decoder) {
      auto fresh = std::vector<int64_t>(tokens.begin() + cache.length, tokens.end());
      logits = model.forward_encoder_decoder_cached(source, {}, token_ids_on(fresh, device).unsqueeze(0), cache);
    } else if (model.supports_kv_cache() && begin == 0) {  // feed only the tokens the cache has not seen
      auto fresh = std::vector<int64_t>(tokens.begin() + cache.length, tokens.end());
      logits = model.forward_cached(token_ids_on(fresh, device).unsqueeze(0), cache);
    } else {  // no cache, or the window slides (every position moves): rerun the cropped context
      Batch b;
      b.input_ids = token_ids_on(std::vector<int64_t>(tokens.begin() + begin, tokens.end()), device).unsqueeze(0);
      logits = model.forward(b).logits;
    }
    auto scores = logits[0][logits.size(1) - 1].to(torch::kCPU, torch::kFloat).unsqueeze(0);  // [1, V], on the host
    mask_forbidden_tokens(scores, {tokens}, prompt_length, config);
    const int64_t token = next_token(scores[0], config, generator);
    tokens.push_back(token);
    generated.push_back(token);
    if (config.eos_token_id && token == *config.eos_token_id) break;
  }
  return generated;
}

std::vector<GeneratedSequence> generate_sequences(Model& model, const std::vector<int64_t>& prompt,
                                                  const GenerationConfig& config, at::Generator& generator) {
  validate_generation_config(config);
  if (config.num_beams > 1) return beam_search(model, prompt, config);
  return {GeneratedSequence{generate(model, prompt, config, generator), 0.0}};
}

torch::Device model_device(const Model& model) {
  for (const auto& p : model.parameters()) return p.device();
  return torch::kCPU;
}

torch::Tensor token_ids_on(const std::vector<int64_t>& ids, const torch::Device& device) {
  auto t = torch::tensor(ids, torch::kLong);
  return device.is_cpu() ? t : t.to(device);
}

namespace {

// [rows, longest] ids padded with 0 on the left or right, and the mask (1 = token).
std::pair<torch::Tensor, torch::Tensor> padded(const std::vector<std::vector<int64_t>>& rows, bool left,
                                               const torch::Device& device) {
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  std::vector<int64_t> ids, mask;
  for (const auto& r : rows) {
    const std::size_t pad = width - r.size();
    const auto at = left ? 0 : r.size();
    std::vector<int64_t> row_ids(r), row_mask(r.size(), 1);
    row_ids.insert(row_ids.begin() + static_cast<std::ptrdiff_t>(at), pad, 0);
    row_mask.insert(row_mask.begin() + static_cast<std::ptrdiff_t>(at), pad, 0);
    ids.insert(ids.end(), row_ids.begin(), row_ids.end());
    mask.insert(mask.end(), row_mask.begin(), row_mask.end());
  }
  const auto n = static_cast<int64_t>(rows.size()), w = static_cast<int64_t>(width);
  return {token_ids_on(ids, device).view({n, w}), token_ids_on(mask, device).view({n, w})};
}

}  // namespace

torch::Tensor left_padded_prompts(const std::vector<std::vector<int64_t>>& prompts, KvCache& cache, const torch::Device& device) {
  torch::Tensor input;
  std::tie(input, cache.key_mask) = padded(prompts, /*left=*/true, device);
  cache.positions = (cache.key_mask.cumsum(1) - 1).clamp_min(0);
  return input;
}

void extend_left_padded(KvCache& cache, const std::vector<int64_t>& positions, const torch::Device& device) {
  const auto n = static_cast<int64_t>(positions.size());
  cache.key_mask = torch::cat({cache.key_mask, torch::ones({n, 1}, cache.key_mask.options())}, 1);
  cache.positions = token_ids_on(positions, device).view({n, 1});
}

std::pair<torch::Tensor, torch::Tensor> right_padded_sources(const std::vector<std::vector<int64_t>>& sources,
                                                             const torch::Device& device) {
  return padded(sources, /*left=*/false, device);
}

int64_t model_max_context(const Model& model) {
  const auto config = model.config_json();
  for (const char* key : {"n_positions", "max_position_embeddings"})
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
  return 0;
}

}  // namespace hftrain
