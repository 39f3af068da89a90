// Attention through the fused CPU kernels (kernels/attention.h) as one autograd operation, for the families'
// attention (`attend` in models/hf_layers, gpt's own): softmax(scale q k^T + bias [+ causal]) v without the
// [queries x keys] probabilities kept for backward. Used where its math is the same as the LibTorch ops': host
// tensors in fp32 or bf16 (computed in fp32, as autocast computes softmax), no attention dropout while
// training, and a bias that is per key (padding), not per query. HFTRAIN_KERNELS=torch turns it off, for
// comparison; everything else keeps the LibTorch ops.
#pragma once

#include "kernels/attention.h"
#include "util/torch_compat.h"

namespace hftrain {

// Whether fused_attention computes this attention: q [B, H, Tq, d], k and v [B, H, Tk, d]; `bias` undefined or
// broadcastable to [B, 1, 1, Tk], and not trained.
bool fused_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, double dropout_p);

// softmax(scale q k^T + bias, causal: query i sees keys j <= i + Tk - Tq) v, [B, H, Tq, d] in q's dtype. The
// result is a transposed view of a [B, Tq, H, d] buffer, so merging the heads afterwards copies nothing.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& bias, double scale, bool causal);

// An fp32 [B, H, T, d] tensor with a contiguous last dimension as the kernels' HeadLayout (its data and strides).
kernels::HeadLayout head_layout(const torch::Tensor& t);

}  // namespace hftrain
