// Fused scaled-dot-product attention on the CPU, forward and backward, for every query row at once of one
// (batch, head): softmax(scale q k^T + key bias [+ causal mask]) v. Scores are built 16 (or 8) keys at a time
// against a transposed copy of the head's keys, exponentiated in the SIMD lane, and folded into the output
// row; no [queries x keys] matrix is kept, only one row of it per thread and each row's log-sum-exp, from
// which backward recomputes the probabilities (the scheme of FlashAttention-2's backward, arXiv:2307.08691).
// Heads run in parallel on the intra-op threads (the OpenMP pool the GEMMs use). One body over the SIMD
// lanes (kernels/simd_*.h), picked at run time (kernels/kernel_choice.h): AVX-512, AVX2+FMA, or scalar (also on ARM for now).
#pragma once

#include <cstdint>

namespace hftrain {
namespace kernels {

// A [batch, heads, time, dim] float tensor: its data and first three strides in elements (dim is contiguous).
struct HeadLayout {
  float* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, time_stride = 0;
  float* row(int64_t b, int64_t h, int64_t t) const { return data + b * batch_stride + h * head_stride + t * time_stride; }
};

struct AttentionShape {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, dim = 0;
  float scale = 1;
  bool causal = false;              // query i sees keys j <= i + (keys - queries)
  const float* key_bias = nullptr;  // additive bias per key, [batch or 1, keys], contiguous over keys; or null
  int64_t key_bias_batch_stride = 0;
};

// o = attention(q, k, v); lse[(b * heads + h) * queries + i] = the log-sum-exp of row i's scores (-inf when
// every key is masked; that row of o is 0).
void attention_forward(const AttentionShape& shape, const HeadLayout& q, const HeadLayout& k, const HeadLayout& v,
                       const HeadLayout& o, float* lse);
// dq, dk, dv (each [batch, heads, time, dim], written whole) from d_o, with the probabilities recomputed from lse.
void attention_backward(const AttentionShape& shape, const HeadLayout& q, const HeadLayout& k, const HeadLayout& v,
                        const HeadLayout& o, const HeadLayout& d_o, const float* lse, const HeadLayout& dq,
                        const HeadLayout& dk, const HeadLayout& dv);

}  // namespace kernels
}  // namespace hftrain
