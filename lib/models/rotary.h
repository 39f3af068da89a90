// Rotary position embeddings, shared by the rotary families (llama today; qwen2, mistral, gemma, phi3 read
// the same config keys): the inverse frequencies and attention scaling of each HF rope_type (transformers'
// modeling_rope_utils: default, linear, dynamic, llama3, yarn, longrope) from a RopeSpec, and the cos / sin
// tables of a forward's positions (rotate_half convention, halves duplicated).
#pragma once

#include <torch/torch.h>

#include <utility>

#include "runspec/rope_scaling.h"

namespace hftrain {

struct RopeSpec {
  double theta = 10000.0;               // rope_theta
  int64_t dim = 0;                      // rotary dimensions (the head size)
  int64_t max_position_embeddings = 0;  // the model's; dynamic scales past it, yarn / longrope read it
  RopeParameters scaling;               // type "default" = unscaled
};

// A checked RopeSpec from a model's options; ConfigError naming the key under `prefix` (e.g.
// "model.rope_scaling.factor") when rope_scaling is not one hftrain builds or does not fit the head size.
RopeSpec make_rope_spec(double theta, const RopeScaling& scaling, int64_t dim, int64_t max_position_embeddings,
                        const std::string& prefix);

struct RotaryFrequencies {
  torch::Tensor inv_freq;         // [dim / 2], float32
  double attention_factor = 1.0;  // multiplies cos and sin (yarn, longrope)
};

// HF's inverse frequencies for a forward whose longest position is seq_len - 1 (dynamic grows its base past
// max_position_embeddings, longrope picks its long factors past original_max_position_embeddings; the others
// do not depend on it).
RotaryFrequencies rotary_frequencies(const RopeSpec& spec, int64_t seq_len, const torch::Device& device);

// cos and sin [b, 1, T, dim] in `dtype` for positions [b, T] (integer), attention factor applied, as HF's
// rotary embedding computes them (float32, then cast). The sequence length the dynamic and longrope types scale by is
// the positions' largest + 1, or `extent` when > 0 (a sequence-parallel slice: its whole rows').
std::pair<torch::Tensor, torch::Tensor> rotary_tables(const RopeSpec& spec, const torch::Tensor& positions,
                                                      torch::ScalarType dtype, int64_t extent = 0);

// Sequences may run past max_position_embeddings: dynamic scaling exists for them.
inline bool rope_extends_context(const RopeSpec& spec) { return spec.scaling.type == "dynamic"; }

}  // namespace hftrain
