// The optimizer updates on a CUDA device (see launch.h): the bodies every CPU instruction set runs
// (optim/kernels/kernel_body.h: Adam / AdamW, SGD, Lion, Adagrad) over the scalar lane, one element per thread in a
// grid-stride loop, so the GPU applies the same formula, gradient types, scaling and 16-bit output in one pass over
// memory (as torch's fused AdamW does) instead of an op per formula term.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/simd_scalar.h"
#include "optim/kernels/cuda/launch.h"
#include "optim/kernels/kernel_body.h"

namespace hftrain {
namespace optim_kernels {
namespace cuda {
namespace {

using Lane = simd::ScalarIsa;
using kernels::cuda::grid_for_items;
using kernels::cuda::kRowThreads;

template <class Op, ElementType G, Out O>
__global__ void update_kernel(Ptrs p, int64_t n, float scale, typename Op::Coef c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    Op::template apply<Lane, G, O>(p, i, scale, c);
}

template <class Op, ElementType G>
void launch_typed(const Stream& s, const Ptrs& p, const typename Op::Coef& c, cudaStream_t stream) {
  const int64_t grid = grid_for_items(s.n, 16384);
  if (s.out16 == nullptr)
    update_kernel<Op, G, Out::kNone><<<grid, kRowThreads, 0, stream>>>(p, s.n, s.grad_scale, c);
  else if (s.out_type == ElementType::kF16)
    update_kernel<Op, G, Out::kF16><<<grid, kRowThreads, 0, stream>>>(p, s.n, s.grad_scale, c);
  else
    update_kernel<Op, G, Out::kBF16><<<grid, kRowThreads, 0, stream>>>(p, s.n, s.grad_scale, c);
}

template <class Op>
int launch(const Stream& s, float* s0, float* s1, const typename Op::Coef& c, void* stream) {
  if (s.n == 0) return 0;
  const Ptrs p{s.param, s.grad, s.out16, s0, s1};
  const auto st = static_cast<cudaStream_t>(stream);
  switch (s.grad_type) {
    case ElementType::kF32: launch_typed<Op, ElementType::kF32>(s, p, c, st); break;
    case ElementType::kBF16: launch_typed<Op, ElementType::kBF16>(s, p, c, st); break;
    case ElementType::kF16: launch_typed<Op, ElementType::kF16>(s, p, c, st); break;
  }
  return kernels::cuda::launch_error();
}

}  // namespace

const char* error_text(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int adam_update(const Stream& s, float* exp_avg, float* exp_avg_sq, const AdamCoef& c, void* stream) {
  return launch<AdamOp>(s, exp_avg, exp_avg_sq, c, stream);
}

int sgd_update(const Stream& s, float* momentum_buffer, const SgdCoef& c, void* stream) {
  return launch<SgdOp>(s, momentum_buffer, nullptr, c, stream);
}

int lion_update(const Stream& s, float* exp_avg, const LionCoef& c, void* stream) {
  return launch<LionOp>(s, exp_avg, nullptr, c, stream);
}

int adagrad_update(const Stream& s, float* state_sum, const AdagradCoef& c, void* stream) {
  return launch<AdagradOp>(s, state_sum, nullptr, c, stream);
}

}  // namespace cuda
}  // namespace optim_kernels
}  // namespace hftrain
