// Fused LayerNorm and RMSNorm on the CPU over the last dimension of contiguous fp32 rows, forward and backward
// in one pass over each row (after the statistics), split over the intra-op threads. LayerNorm:
// y = (x - mean) rstd w + b, rstd = 1 / sqrt(var + eps); RMSNorm (T5 / Llama): y = x rstd w, rstd =
// 1 / sqrt(mean(x^2) + eps). The statistics are kept per row for backward, which gives dx and sums dw (db) over
// rows in a fixed number of row blocks added in order, so the result does not depend on the thread count.
#pragma once

#include <cstdint>

namespace hftrain {
namespace kernels {

// `b` may be null (no bias). `residual` and `sum` both null, or the residual add fused in: the norm's input is
// x + residual, written to `sum` (the residual stream's next value), and mean / rstd are of it.
void layer_norm_forward(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, float eps);
// x: the norm's input (the sum, when fused). `d_sum` may be null; when given, the gradient that reaches that input
// from elsewhere (the residual stream's), added to dx. `dw` and `db` may be null (not needed); when given they are
// overwritten with the sums over rows.
void layer_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                         const float* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t cols);

void rms_norm_forward(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                      int64_t rows, int64_t cols, float eps);
void rms_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd, float* dx,
                       float* dw, int64_t rows, int64_t cols);
// RMSNorm over bf16 rows (bit patterns), rounded where HF's RMSNorm on bf16 rounds: the normalised x (computed in
// fp32) before the weight multiplies it, then the product; backward rounds dy w before the fp32 backward of
// x rstd, and dx once; dw sums the rounded products dy h in fp32 (in the fixed row blocks) and rounds once.
void rms_norm_forward_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows, int64_t cols,
                           float eps);
void rms_norm_backward_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                            uint16_t* dw, int64_t rows, int64_t cols);

}  // namespace kernels
}  // namespace hftrain
