// Generation settings checks, HF's processors and warpers, and the one-prompt entry points (see generate.h).
#include "generate/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include <cmath>
#include <limits>

#include "generate/decode.h"
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
  if (config.max_new_tokens) return *config.max_new_tokens;  // HF: max_new_tokens wins when both are set
  if (!config.max_length) return kDefaultMaxNewTokens;
  if (*config.max_length <= start_length)  // HF's _validate_generated_length refuses it too
    throw ConfigError("generation.max_length " + std::to_string(*config.max_length) + " leaves no room to generate after " +
                      std::to_string(start_length) + " tokens of " +
                      (start_length == 1 ? "decoder start" : "prompt") + "; raise it or set generation.max_new_tokens");
  return *config.max_length - start_length;
}

void validate_generation_config(const GenerationConfig& c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (c.max_new_tokens && *c.max_new_tokens < 1)
    throw ConfigError("generation.max_new_tokens must be >= 1, got " + n(*c.max_new_tokens));
  if (c.max_length && *c.max_length < 1) throw ConfigError("generation.max_length must be >= 1, got " + n(*c.max_length));
  if (c.min_length && *c.min_length < 0) throw ConfigError("generation.min_length must be >= 0, got " + n(*c.min_length));
  if (c.min_length && c.max_length && !c.max_new_tokens && *c.min_length > *c.max_length)
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
  if (c.early_stopping != "false" && c.early_stopping != "true" && c.early_stopping != "never")
    throw ConfigError("generation.early_stopping must be true, false or never, got '" + c.early_stopping + "'");
  if (c.do_sample && c.temperature <= 0) throw ConfigError("generation.temperature must be > 0 when do_sample is true");
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

std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator) {
  return std::move(decode_prompts(model, {prompt}, config, generator, Picking::kGreedyOrSampling).front().front().tokens);
}

std::vector<GeneratedSequence> generate_sequences(Model& model, const std::vector<int64_t>& prompt,
                                                  const GenerationConfig& config, at::Generator& generator) {
  return std::move(decode_prompts(model, {prompt}, config, generator, picking_for(config)).front());
}

int64_t model_max_context(const Model& model) {
  const auto config = model.config_json();
  for (const char* key : {"n_positions", "max_position_embeddings"})
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
  return 0;
}

}  // namespace hftrain
