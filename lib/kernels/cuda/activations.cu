// GELU and SwiGLU on a CUDA device (see launch.h): elementwise, grid-stride, each element computed in fp32 with
// the formulas of device_math.cuh and rounded where the host kernels round (kernels/activation.h). Backward
// evaluates the gate again from x rather than reading it back from the output.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.h"

namespace hftrain {
namespace kernels {
namespace cuda {
namespace {

namespace dm = device_math;

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const uint16_t* p, int64_t i) { return simd::bf16_to_float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(uint16_t* p, int64_t i, float v) { p[i] = simd::float_to_bf16(v); }
// Where a bf16 op rounds its result: bf16 storage rounds, fp32 does not.
__device__ __forceinline__ float rounded(const float*, float v) { return v; }
__device__ __forceinline__ float rounded(const uint16_t*, float v) { return dm::round_bf16(v); }

#define HFTRAIN_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n, bool tanh_form) {
  HFTRAIN_GRID_STRIDE(i, n) { store(y, i, dm::gelu(load(x, i), tanh_form)); }
}

template <class T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, int64_t n, bool tanh_form) {
  HFTRAIN_GRID_STRIDE(i, n) { store(dx, i, load(dy, i) * dm::gelu_derivative(load(x, i), tanh_form)); }
}

// y = hf(silu(g)) u.
template <class T>
__global__ void swiglu_forward_kernel(const T* g, const T* u, T* y, int64_t n) {
  HFTRAIN_GRID_STRIDE(i, n) { store(y, i, rounded(g, dm::silu(load(g, i))) * load(u, i)); }
}

// du = dy hf(silu(g)); dg = hf(dy u) silu'(g).
template <class T>
__global__ void swiglu_backward_kernel(const T* g, const T* u, const T* dy, T* dg, T* du, int64_t n) {
  HFTRAIN_GRID_STRIDE(i, n) {
    const float gi = load(g, i), d = load(dy, i);
    store(du, i, d * rounded(g, dm::silu(gi)));
    store(dg, i, rounded(g, d * load(u, i)) * dm::silu_derivative(gi));
  }
}

#undef HFTRAIN_GRID_STRIDE

int64_t grid_for(int64_t n) { return grid_for_items(n, 8192); }
cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

int gelu_forward(const float* x, float* y, int64_t n, GeluForm form, Stream stream) {
  gelu_forward_kernel<float><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(x, y, n, form == GeluForm::kTanh);
  return launch_error();
}

int gelu_backward(const float* x, const float* dy, float* dx, int64_t n, GeluForm form, Stream stream) {
  gelu_backward_kernel<float><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(x, dy, dx, n, form == GeluForm::kTanh);
  return launch_error();
}

int gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form, Stream stream) {
  gelu_forward_kernel<uint16_t><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(x, y, n, form == GeluForm::kTanh);
  return launch_error();
}

int gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form, Stream stream) {
  gelu_backward_kernel<uint16_t><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(x, dy, dx, n,
                                                                                     form == GeluForm::kTanh);
  return launch_error();
}

int swiglu_forward(const float* g, const float* u, float* y, int64_t n, Stream stream) {
  swiglu_forward_kernel<float><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(g, u, y, n);
  return launch_error();
}

int swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n, Stream stream) {
  swiglu_backward_kernel<float><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(g, u, dy, dg, du, n);
  return launch_error();
}

int swiglu_forward_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n, Stream stream) {
  swiglu_forward_kernel<uint16_t><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(g, u, y, n);
  return launch_error();
}

int swiglu_backward_bf16(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du, int64_t n,
                         Stream stream) {
  swiglu_backward_kernel<uint16_t><<<grid_for(n), kRowThreads, 0, as_stream(stream)>>>(g, u, dy, dg, du, n);
  return launch_error();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
