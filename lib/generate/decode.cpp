// The decode loop and the choice of which prompts are decoded together (see decode.h).
#include "generate/decode.h"

#include <numeric>

#include "util/error.h"

namespace hftrain {
namespace {

DecodeRows rows_of(const TokenPicker& picker, const std::vector<std::size_t>& active) {
  DecodeRows rows;
  for (std::size_t p : active)
    for (const auto& row : picker.rows(p)) rows.push_back(&row);
  return rows;
}

// The loop: feed, pick, let the finished prompts' rows leave, until every prompt is done.
void decode(Feeder& feeder, TokenPicker& picker) {
  std::vector<std::size_t> active(picker.prompts());
  std::iota(active.begin(), active.end(), std::size_t{0});
  const int64_t per_prompt = picker.rows_per_prompt();
  while (!active.empty()) {
    const std::vector<std::vector<int64_t>> parents = picker.pick(feeder.next_logits(rows_of(picker, active)), active);
    std::vector<std::size_t> still;
    std::vector<int64_t> keep;  // the feeder's rows that go on, in the order of the next step's rows
    for (std::size_t k = 0; k < active.size(); ++k) {
      if (picker.finished(active[k])) continue;
      still.push_back(active[k]);
      for (int64_t parent : parents[k]) keep.push_back(static_cast<int64_t>(k) * per_prompt + parent);
    }
    active = std::move(still);
    if (!active.empty()) feeder.keep_rows(keep);
  }
}

std::vector<int64_t> start_of(const Model& model, const std::vector<int64_t>& prompt) {
  return model.is_encoder_decoder() ? std::vector<int64_t>{model.decoder_start_token_id()} : prompt;
}

// Whether the rerun window decodes the prompt (see decode_prompts), so that it goes alone.
bool needs_window(const Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  if (model.is_encoder_decoder()) return false;
  const auto length = static_cast<int64_t>(prompt.size());
  return !model.supports_kv_cache() || (config.max_context > 0 && length + new_token_budget(config, length) > config.max_context);
}

std::vector<std::vector<GeneratedSequence>> decode_together(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                            const GenerationConfig& config, at::Generator& generator,
                                                            Picking picking) {
  std::vector<std::vector<int64_t>> starts;
  for (const auto& prompt : prompts) starts.push_back(start_of(model, prompt));
  const std::unique_ptr<TokenPicker> picker = make_token_picker(picking, std::move(starts), config, generator);
  const std::unique_ptr<Feeder> feeder = make_feeder(model, prompts, config, picker->rows_per_prompt());
  decode(*feeder, *picker);
  std::vector<std::vector<GeneratedSequence>> out;
  for (std::size_t p = 0; p < prompts.size(); ++p) out.push_back(picker->result(p));
  return out;
}

}  // namespace

Picking picking_for(const GenerationConfig& config) {
  return config.num_beams > 1 ? Picking::kBeams : Picking::kGreedyOrSampling;
}

std::vector<std::vector<GeneratedSequence>> decode_prompts(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                           const GenerationConfig& config, at::Generator& generator,
                                                           Picking picking) {
  validate_generation_config(config);
  for (const auto& prompt : prompts)
    if (prompt.empty()) throw RuntimeFailure("generate: the prompt is empty (nothing to condition on)");
  torch::NoGradGuard no_grad;
  std::vector<std::vector<GeneratedSequence>> out(prompts.size());
  std::vector<std::size_t> together;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts.size() > 1 && !needs_window(model, prompts[i], config))
      together.push_back(i);
    else
      out[i] = std::move(decode_together(model, {prompts[i]}, config, generator, picking).front());
  }
  std::vector<std::vector<int64_t>> batch;
  for (std::size_t i : together) batch.push_back(prompts[i]);
  if (batch.empty()) return out;
  auto results = decode_together(model, batch, config, generator, picking);
  for (std::size_t k = 0; k < together.size(); ++k) out[together[k]] = std::move(results[k]);
  return out;
}

}  // namespace hftrain
