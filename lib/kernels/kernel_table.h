// Internal to the model kernels: what one instruction set provides -- attention for one (batch, head) per call
// on scratch memory the caller allocates, GELU and SwiGLU over a range of elements, LayerNorm and RMSNorm (each with an
// optional residual add) over a block of rows,
// cross-entropy over one row of logits, the 4-bit dequantisation over a range of a weight's elements -- and the per-ISA
// constructors (nullptr when the ISA is not compiled in); `model_kernels()` is the table in use.
#pragma once

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/normalization.h"

namespace hftrain {
namespace kernels {

struct ModelKernelTable {
  const char* name;
  int width;  // floats per lane: rows in scratch are padded to a multiple of it
  void (*gelu_forward)(const float* x, float* y, int64_t n, GeluForm form);
  void (*gelu_backward)(const float* x, const float* y, const float* dy, float* dx, int64_t n, GeluForm form);
  void (*gelu_forward_bf16)(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form);
  void (*gelu_backward_bf16)(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form);
  void (*swiglu_forward)(const float* g, const float* u, float* y, int64_t n);
  void (*swiglu_backward)(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n);
  void (*swiglu_forward_bf16)(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n);
  void (*swiglu_backward_bf16)(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du,
                               int64_t n);
  // residual / sum, d_sum: null, or the fused residual add (normalization.h).
  void (*layer_norm_forward)(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                             float* mean, float* rstd, int64_t rows, int64_t cols, float eps);
  void (*layer_norm_backward)(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                              const float* rstd, float* dx, float* dw_part, float* db_part, int64_t rows, int64_t cols);
  void (*rms_norm_forward)(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                           int64_t rows, int64_t cols, float eps);
  void (*rms_norm_backward)(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd,
                            float* dx, float* dw_part, int64_t rows, int64_t cols);
  void (*rms_norm_forward_bf16)(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows, int64_t cols,
                                float eps);
  void (*rms_norm_backward_bf16)(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                                 float* dw_part, int64_t rows, int64_t cols);
  void (*forward_head)(const AttentionShape&, int64_t b, int64_t h, const HeadLayout& q, const HeadLayout& k,
                       const HeadLayout& v, const HeadLayout& o, float* lse, float* scratch);
  void (*backward_head)(const AttentionShape&, int64_t b, int64_t h, const HeadLayout& q, const HeadLayout& k,
                        const HeadLayout& v, const HeadLayout& o, const HeadLayout& d_o, const float* lse,
                        const HeadLayout& dq, const HeadLayout& dk, const HeadLayout& dv, float* scratch);
  // One row of cross_entropy_rows (label in [0, vocab)).
  void (*cross_entropy_row)(float* logits, int64_t vocab, int64_t label, float epsilon, float scale, bool gradient,
                            float* loss);
  // Elements [begin, end) of a packed 4-bit weight (quant4bit.h), in float32 or rounded to bf16 bits.
  void (*dequantize_4bit)(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                          int64_t end, float* out);
  void (*dequantize_4bit_bf16)(const uint8_t* packed, const float* absmax, const float* code, int64_t block,
                               int64_t begin, int64_t end, uint16_t* out);
};

const ModelKernelTable* scalar_model_kernels();
const ModelKernelTable* avx2_model_kernels();
const ModelKernelTable* avx512_model_kernels();

const ModelKernelTable* model_kernels();  // the chosen one (kernel_choice.cpp)

namespace {  // internal linkage: each file compiled for its own ISA keeps its own copy

constexpr int64_t kRows = 4;           // forward: query rows per block
constexpr int64_t kBackwardRows = 16;  // backward: query rows whose P and dS are kept at once

inline int64_t padded_to(int64_t n, int64_t width) { return (n + width - 1) / width * width; }

// A lane of fp32 elements, or of bf16 ones widened exactly to fp32 (and rounded back to bf16 when stored).
template <class V>
typename V::R load_lane(const float* p) { return V::load(p); }
template <class V>
typename V::R load_lane(const uint16_t* p) { return V::load_bf16(p); }
template <class V>
void store_lane(float* p, typename V::R x) { V::store(p, x); }
template <class V>
void store_lane(uint16_t* p, typename V::R x) { V::store_bf16(p, x); }

// A lane rounded to bf16 (to nearest even) and widened back: what a bf16 tensor between two ops holds.
template <class V>
typename V::R round_to_bf16(typename V::R x) {
  uint16_t h[V::kWidth];
  V::store_bf16(h, x);
  return V::load_bf16(h);
}

// Scratch floats per call (' = padded to the lane width). Forward: K transposed [dim x keys'], V [keys x dim'],
// bias [keys'], scores [kRows x keys'], q and the output accumulator [kRows x dim']. Backward: K and V
// transposed, K and the dK / dV accumulators [keys x dim'], bias, P and dS [kBackwardRows x keys'], q, dO and
// dQ [kBackwardRows x dim'].
inline int64_t forward_scratch(const AttentionShape& s, int64_t width) {
  const int64_t tk = padded_to(s.keys, width), d = padded_to(s.dim, width);
  return s.dim * tk + s.keys * d + tk + kRows * tk + 2 * kRows * d;
}
inline int64_t backward_scratch(const AttentionShape& s, int64_t width) {
  const int64_t tk = padded_to(s.keys, width), d = padded_to(s.dim, width);
  return 2 * s.dim * tk + 3 * s.keys * d + tk + 2 * kBackwardRows * tk + 3 * kBackwardRows * d;
}

}  // namespace

}  // namespace kernels
}  // namespace hftrain
