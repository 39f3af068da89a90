// Sums and maxima over the threads of one block (a warp's shuffles, then the warps' results through shared
// memory), for the row kernels of kernels/cuda/: every thread gets the result. And what every CUDA kernel of lib/
// shares at launch: the block size, the grid sizes (never 0; grid-stride loops take the rest) and the launch's error.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace hftrain {
namespace kernels {
namespace cuda {

constexpr int kRowThreads = 256;  // threads per block of every kernel (row kernels: one row per block at a time)

// Blocks for `items` items at one per thread, at most `cap`.
inline int64_t grid_for_items(int64_t items, int64_t cap) {
  return std::max<int64_t>(1, std::min<int64_t>((items + kRowThreads - 1) / kRowThreads, cap));
}
// Blocks for `rows` rows at one block per row, at most `cap`.
inline int64_t grid_for_rows(int64_t rows, int64_t cap) { return std::max<int64_t>(1, std::min<int64_t>(rows, cap)); }
// The CUDA error of the launches just queued (0 = none), as launch.h's functions return it.
inline int launch_error() { return static_cast<int>(cudaGetLastError()); }

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// `scratch`: 32 floats of shared memory, free again when this returns (its last barrier).
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op, float identity) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  v = warp_reduce(v, op);
  __syncthreads();
  return v;
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce(v, scratch, SumOp(), 0.0f); }
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, MaxOp(), -INFINITY);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
