// HFTRAIN_HD marks a small function that both the host kernels and the CUDA kernels (kernels/cuda/,
// optim/kernels/cuda/) call, so that each formula is written once: __host__ __device__ under nvcc, a plain inline
// function under the C++ compiler; and mul_rounded, a product that is never fused into a multiply-add.
#pragma once

#ifdef __CUDACC__
#define HFTRAIN_HD __host__ __device__ __forceinline__
#else
#define HFTRAIN_HD inline
#endif

// a * b rounded on its own, never contracted with a following add into a multiply-add (nvcc contracts by default),
// where a kernel must round as separate LibTorch ops or the host loop do.
HFTRAIN_HD float mul_rounded(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
