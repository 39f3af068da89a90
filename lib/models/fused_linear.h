// The linear layers' product y = x W^T + b (nn.Linear's [out, in] weight) or y = x W + b (HF's Conv1D
// [in, out] weight) as one autograd operation over oneDNN's sgemm (kernels/gemm.h): the forward product
// writes into the bias-filled output, and backward forms dX and dW with one product each (db as dY's
// column sums). Used for fp32 host tensors while the fused kernels are on and autocast is off.
// Under bf16 autocast on a CPU without bf16 instructions (kernels/cpu_features.h), where oneDNN emulates bf16
// GEMMs 3-4.5x slower than fp32 ones, the same products run in fp32 over the operands rounded to bf16, as
// autocast rounds them: a product of two bf16 values is exact in fp32 and both accumulate in fp32, so the result
// differs from the bf16 GEMM's only by the order of the additions; it is rounded to bf16 as autocast's output,
// and so are dX and dW. Anything else (another device, HFTRAIN_KERNELS=torch, a build without oneDNN, a CPU
// with bf16 instructions) takes LibTorch's ops.
#pragma once

#include <optional>

#include "util/torch_compat.h"

namespace hftrain {

// `weight_in_out`: the weight is [in, out] (Conv1D) rather than [out, in]. `bias` may be undefined.
torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             bool weight_in_out = false);

// c = op(a) op(b) + beta c for 2-D tensors (op = transpose when trans_x; beta 0 or 1), outside autograd: the
// products inside hand-written backward passes (the chunked LM loss). oneDNN's sgemm for contiguous fp32 host
// tensors while the fused kernels are on, and for bf16 operands as bf16 linear layers are multiplied (below), into
// a bf16 or an fp32 c (then accumulated in fp32 without rounding); else LibTorch's mm / addmm in the operands'
// dtype, converted to c's.
void matmul_into(torch::Tensor& c, const torch::Tensor& a, bool trans_a, const torch::Tensor& b, bool trans_b, float beta);

// Whether bf16 linear layers under autocast multiply in fp32 (see above): on a CPU without bf16 instructions,
// unless a test forces the answer (nullopt: the CPU decides again).
bool bf16_linear_through_fp32();
void force_bf16_linear_through_fp32(std::optional<bool> through_fp32);

}  // namespace hftrain
