// Sums and maxima over the threads of one block (a warp's shuffles, then the warps' results through shared
// memory), for the row kernels of kernels/cuda/: every thread gets the result.
#pragma once

namespace hftrain {
namespace kernels {
namespace cuda {

constexpr int kRowThreads = 256;  // threads per block of the row kernels (one row per block at a time)

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
