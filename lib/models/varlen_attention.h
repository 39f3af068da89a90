// Padding-free rows through flash attention's variable-length entry (issue 60): every example of a packed row
// attends causally to itself in one kernel, given the examples' cumulative lengths, instead of one attention
// call per example. It is PyTorch's own `aten::_flash_attention_forward` (PyTorch >= 2.0 built with flash
// attention, on CUDA; its backward is in PyTorch's autograd), found by name in the dispatcher and called with
// its arguments filled by name, so one source compiles against LibTorch 1.13 (which has no such op) and works
// with any 2.x signature. Grouped key/value heads go in as they are (the kernel shares them), not repeated.
#pragma once

#include <cstdint>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

// q [1, H, T, D] and k / v [1, KV, T, D] of one packed row whose examples have lengths `segments` (summing to T):
// the causal attention of each example within itself, [1, H, T, D]; scaled by `scale` (0: 1 / sqrt(D)), dropout
// `dropout_p` on the probabilities. Undefined when the entry does not apply: not CUDA, not bf16 / fp16, a head
// size flash does not take (> 256 or not a multiple of 8), H not a multiple of KV, a LibTorch without the op (or
// without its `scale` argument for a scale given), the fused paths switched off (HFTRAIN_KERNELS=torch), or once
// the op has refused a call (a GPU older than Ampere, a PyTorch built without flash: a warning says so); the
// caller then attends example by example.
torch::Tensor varlen_flash_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::vector<int64_t>& segments, double dropout_p, double scale);

// Whether this LibTorch has the entry at all (the op is registered: PyTorch >= 2.0).
bool varlen_flash_available();

}  // namespace hftrain
