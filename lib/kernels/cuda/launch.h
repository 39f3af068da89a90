// The CUDA kernels of the fused row operations, as host functions over device pointers (no LibTorch in them, so
// nvcc compiles them without LibTorch's CUDA headers): the same operations and rounding as the host kernels
// (kernels/normalization.h, activation.h, cross_entropy.h, quant4bit.h, rotary.h), each queued on `stream` (a cudaStream_t). Each returns
// the CUDA error of its launch (0 = none); error_text names one. kernels/row_kernels.cpp wraps them with the host
// kernels' signatures, giving them the caller's stream and the backward passes' workspace.
#pragma once

#include <cstdint>

#include "kernels/activation.h"
#include "kernels/cross_entropy.h"
#include "kernels/quant4bit.h"
#include "kernels/rotary.h"

namespace hftrain {
namespace kernels {
namespace cuda {

using Stream = void*;

const char* error_text(int code);

// 0 when this build's kernels load on the current device, else the CUDA error (an older driver than the runtime
// they were built against, or an architecture they were not compiled for).
int kernels_loadable();

// Blocks of a norm's backward pass for `rows` rows: its workspace holds that many rows of `cols` floats of
// partial dw sums (twice as many with LayerNorm's db), summed in block order afterwards (no atomics).
int64_t norm_backward_blocks(int64_t rows);

int rms_norm_forward(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                     int64_t rows, int64_t cols, float eps, Stream stream);
int rms_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd, float* dx,
                      float* dw, float* workspace, int64_t rows, int64_t cols, Stream stream);
int rms_norm_forward_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows, int64_t cols,
                          float eps, Stream stream);
int rms_norm_backward_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                           uint16_t* dw, float* workspace, int64_t rows, int64_t cols, Stream stream);

int layer_norm_forward(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                       float* mean, float* rstd, int64_t rows, int64_t cols, float eps, Stream stream);
int layer_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                        const float* rstd, float* dx, float* dw, float* db, float* workspace, int64_t rows, int64_t cols,
                        Stream stream);

int gelu_forward(const float* x, float* y, int64_t n, GeluForm form, Stream stream);
int gelu_backward(const float* x, const float* dy, float* dx, int64_t n, GeluForm form, Stream stream);
int gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form, Stream stream);
int gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form, Stream stream);
int swiglu_forward(const float* g, const float* u, float* y, int64_t n, Stream stream);
int swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n, Stream stream);
int swiglu_forward_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n, Stream stream);
int swiglu_backward_bf16(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du, int64_t n,
                         Stream stream);

// The rows' losses into row_loss and, with p.gradient, the gradient over the logits. A row whose label is neither
// ignore_index nor in [0, vocab) gets a NaN loss and is left unwritten; the lowest such row is atomically kept in
// *bad_row (set it to UINT64_MAX before), which the caller reads back to name it.
int cross_entropy_rows(const CrossEntropyRows& p, float* row_loss, unsigned long long* bad_row, Stream stream);

// Elements [begin, end) of a packed 4-bit tensor, and an 8-bit block-wise one (quant4bit.h), the pointers the device's.
int dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                    int64_t end, float* out, Stream stream);
int dequantize_4bit_bf16(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                         int64_t end, uint16_t* out, Stream stream);
int dequantize_8bit_blockwise(const uint8_t* codes, int64_t n, int64_t block, const float* map, const float* absmax,
                              float offset, float* out, Stream stream);

// Rotary embedding's forward or backward over device pointers (rotary.h).
int rotary_rows(const RotaryRows& p, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
