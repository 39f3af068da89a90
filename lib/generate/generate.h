// Text generation for causal LMs, as HF generate() does it for one prompt: greedy decoding, or
// sampling after HF's logits warpers (temperature, then top-k, then top-p) with a seeded generator;
// up to max_new_tokens, stopping after the eos token. Models with a KV cache (gpt, gpt2, llama) run the
// prompt once and then one token per step; once the context outgrows max_context the window slides and
// each step reruns it (positions move), as models without a cache always do.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "models/model.h"

namespace hftrain {

struct GenerationConfig {
  int64_t max_new_tokens = 16;
  bool do_sample = false;
  double temperature = 1.0;   // 1 = unchanged
  int64_t top_k = 50;         // 0 = off
  double top_p = 1.0;         // 1 = off
  std::optional<int64_t> eos_token_id;  // stop after generating it (it is kept in the output)
  int64_t max_context = 0;    // > 0: the model sees only the last max_context tokens
};

// HF's sampling warpers on one row of next-token logits [V]: divide by temperature, keep the top_k
// largest (others -inf), keep the smallest set whose probability reaches top_p (at least one token).
torch::Tensor warp_logits(const torch::Tensor& logits, const GenerationConfig& config);

// Picks the next token from logits [V]: argmax, or a draw from softmax(warp_logits) using `generator`.
int64_t next_token(const torch::Tensor& logits, const GenerationConfig& config, at::Generator& generator);

// The generated continuation of `prompt` (without the prompt). `generator` is advanced by sampling.
std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator);

// A CPU generator seeded like torch.Generator().manual_seed(seed).
at::Generator make_generator(uint64_t seed);

// The longest context the model accepts according to its config.json (n_positions,
// max_position_embeddings); 0 when it names none.
int64_t model_max_context(const Model& model);

}  // namespace hftrain
