// HFTRAIN_HD marks a small function that both the host kernels and the CUDA kernels (kernels/cuda/,
// optim/kernels/cuda/) call, so that each formula is written once: __host__ __device__ under nvcc, a plain inline
// function under the C++ compiler.
#pragma once

#ifdef __CUDACC__
#define HFTRAIN_HD __host__ __device__ __forceinline__
#else
#define HFTRAIN_HD inline
#endif
