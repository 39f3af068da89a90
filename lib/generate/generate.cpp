// Generation (see generate.h).
#include "generate/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

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

int64_t next_token(const torch::Tensor& logits, const GenerationConfig& config, at::Generator& generator) {
  if (!config.do_sample) return logits.argmax(-1).item<int64_t>();
  auto probs = torch::softmax(warp_logits(logits, config), -1);
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator) {
  if (config.do_sample && config.temperature <= 0)
    throw ConfigError("generation.temperature must be > 0 when do_sample is true");
  if (prompt.empty()) throw RuntimeFailure("generate: the prompt is empty (nothing to condition on)");
  torch::NoGradGuard no_grad;
  std::vector<int64_t> tokens = prompt;
  std::vector<int64_t> generated;
  KvCache cache;
  for (int64_t i = 0; i < config.max_new_tokens; ++i) {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t begin = config.max_context > 0 && n > config.max_context ? n - config.max_context : 0;
    torch::Tensor logits;
    if (model.supports_kv_cache() && begin == 0) {  // feed only the tokens the cache has not seen
      auto fresh = std::vector<int64_t>(tokens.begin() + cache.length, tokens.end());
      logits = model.forward_cached(torch::tensor(fresh, torch::kLong).unsqueeze(0), cache);
    } else {  // no cache, or the window slides (every position moves): rerun the cropped context
      Batch b;
      b.input_ids = torch::tensor(std::vector<int64_t>(tokens.begin() + begin, tokens.end()), torch::kLong).unsqueeze(0);
      logits = model.forward(b).logits;
    }
    const int64_t token = next_token(logits[0][logits.size(1) - 1].to(torch::kFloat), config, generator);
    tokens.push_back(token);
    generated.push_back(token);
    if (config.eos_token_id && token == *config.eos_token_id) break;
  }
  return generated;
}

int64_t model_max_context(const Model& model) {
  const auto config = model.config_json();
  for (const char* key : {"n_positions", "max_position_embeddings"})
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
  return 0;
}

}  // namespace hftrain
