// Attention entries of PyTorch 2.x reached through the dispatcher by name (issue 60), so that one source compiles
// against LibTorch 1.13 (which has neither) and works with any 2.x signature: each op is found by its schema name
// and called with its arguments filled by name, defaults for the rest. Where an entry does not apply (the host,
// fp32, a LibTorch without the op or the argument, HFTRAIN_KERNELS=torch) the functions return an undefined
// tensor and the caller attends as before.
//   varlen_flash_attention  padding-free rows: every example of a packed row attends causally to itself in one
//                           call of `aten::_flash_attention_forward` with the examples' cumulative lengths (its
//                           backward is PyTorch's autograd formula), instead of one attention call per example.
//   gqa_causal_attention    grouped-query causal attention without a mask through SDPA's `enable_gqa` (PyTorch
//                           >= 2.5): the key/value heads are shared by the kernel, not repeated in memory first.
#pragma once

#include <cstdint>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

// q [1, H, T, D] and k / v [1, KV, T, D] of one packed row whose examples have lengths `segments` (summing to T):
// the causal attention of each example within itself, [1, H, T, D]; scaled by `scale` (0: 1 / sqrt(D)), dropout
// `dropout_p` on the probabilities. Undefined when it does not apply: besides the above, a head size flash does not
// take (> 256 or not a multiple of 8), H not a multiple of KV, a scale given to a signature without `scale`, or
// once the op has refused a call (a GPU older than Ampere, a PyTorch built without flash: a warning says so).
torch::Tensor varlen_flash_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::vector<int64_t>& segments, double dropout_p, double scale);

// q [B, H, T, D] and k / v [B, KV, T, D] with H a multiple of KV > 1 (grouped-query attention): causal attention
// with the default scale 1 / sqrt(D), [B, H, T, D]. Undefined when it does not apply (also: H not a multiple of
// KV, or an SDPA without `enable_gqa`).
torch::Tensor gqa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double dropout_p);

// Whether this LibTorch has the variable-length entry at all (the op is registered: PyTorch >= 2.0).
bool varlen_flash_available();
// Whether its SDPA takes `enable_gqa` (PyTorch >= 2.5).
bool sdpa_gqa_available();

}  // namespace hftrain
