// RMSNorm and LayerNorm on a CUDA device (see launch.h): one block per row at a time (grid-stride over rows), the
// row's statistics by block reductions, the same formulas and bf16 rounding points as the host kernels
// (kernels/normalization_body.h). Backward writes each block's partial dw (db) sums into its own workspace row,
// then one more kernel adds the blocks' rows in order: no atomics, the same result on every run.
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

// Storage of a row's elements: fp32 as it is, bf16 as bit patterns computed in fp32. `hf` rounds to bf16 where
// HF's RMSNorm on a bf16 model rounds and leaves fp32 alone.
template <class T>
struct Elem;
template <>
struct Elem<float> {
  __device__ static float load(const float* p, int64_t i) { return p[i]; }
  __device__ static void store(float* p, int64_t i, float v) { p[i] = v; }
  __device__ static float hf(float v) { return v; }
};
template <>
struct Elem<uint16_t> {
  __device__ static float load(const uint16_t* p, int64_t i) { return simd::bf16_to_float(p[i]); }
  __device__ static void store(uint16_t* p, int64_t i, float v) { p[i] = simd::float_to_bf16(v); }
  __device__ static float hf(float v) { return dm::round_bf16(v); }
};

int64_t grid_for_rows(int64_t rows) { return cuda::grid_for_rows(rows, 4096); }


// The norm's input element: x, or x + residual written to sum (fp32 rows only).
__device__ __forceinline__ float input_at(const float* x, const float* residual, float* sum, int64_t i) {
  if (residual == nullptr) return x[i];
  const float v = x[i] + residual[i];
  sum[i] = v;
  return v;
}
__device__ __forceinline__ float input_at(const uint16_t* x, const float*, float*, int64_t i) {
  return simd::bf16_to_float(x[i]);
}

template <class T>
__global__ void rms_forward_kernel(const T* x, const float* residual, float* sum, const T* w, T* y, float* rstd,
                                   int64_t rows, int64_t cols, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = input_at(x, residual, sum, base + c);
      sq += v * v;
    }
    const float s = 1.0f / sqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0) rstd[r] = s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = residual != nullptr ? sum[base + c] : Elem<T>::load(x, base + c);
      Elem<T>::store(y, base + c, Elem<T>::load(w, c) * Elem<T>::hf(v * s));
    }
  }
}

// dx = rstd (g - xhat mean(g xhat)) (+ d_sum), g = hf(dy w), xhat = x rstd; partial[c] += hf(dy hf(xhat)).
template <class T>
__global__ void rms_backward_kernel(const T* x, const T* w, const T* dy, const float* d_sum, const float* rstd, T* dx,
                                    float* workspace, int64_t rows, int64_t cols) {
  __shared__ float scratch[32];
  float* partial = workspace != nullptr ? workspace + blockIdx.x * cols : nullptr;
  if (partial != nullptr)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) partial[c] = 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    const float s = rstd[r];
    float gx = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = Elem<T>::load(x, base + c) * s, d = Elem<T>::load(dy, base + c);
      gx += Elem<T>::hf(d * Elem<T>::load(w, c)) * xhat;
      if (partial != nullptr) partial[c] += Elem<T>::hf(d * Elem<T>::hf(xhat));
    }
    const float mean_gx = block_sum(gx, scratch) / static_cast<float>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = Elem<T>::load(x, base + c) * s;
      const float d = s * (Elem<T>::hf(Elem<T>::load(dy, base + c) * Elem<T>::load(w, c)) - xhat * mean_gx);
      Elem<T>::store(dx, base + c, d_sum != nullptr ? d + d_sum[base + c] : d);
    }
  }
}

// out[c] = the sum over `blocks` workspace rows of column c, added in block order.
template <class T>
__global__ void column_sum_kernel(const float* workspace, int64_t blocks, int64_t cols, T* out) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float total = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) total += workspace[b * cols + c];
    Elem<T>::store(out, c, total);
  }
}

template <class T>
void launch_column_sum(const float* workspace, int64_t blocks, int64_t cols, T* out, cudaStream_t stream) {
  const int64_t grid = grid_for_items(cols, 1024);
  column_sum_kernel<T><<<grid, kRowThreads, 0, stream>>>(workspace, blocks, cols, out);
}

__global__ void layer_forward_kernel(const float* x, const float* residual, float* sum, const float* w, const float* b,
                                     float* y, float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    const float* in = residual != nullptr ? sum : x;
    float total = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) total += input_at(x, residual, sum, base + c);
    const float m = block_sum(total, scratch) / static_cast<float>(cols);
    float var = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = in[base + c] - m;
      var += d * d;
    }
    const float s = 1.0f / sqrtf(block_sum(var, scratch) / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = (in[base + c] - m) * s * w[c];
      y[base + c] = b != nullptr ? v + b[c] : v;
    }
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) (+ d_sum), g = dy w; partial dw += dy xhat, partial db += dy.
__global__ void layer_backward_kernel(const float* x, const float* w, const float* dy, const float* d_sum,
                                      const float* mean, const float* rstd, float* dx, float* dw_ws, float* db_ws,
                                      int64_t rows, int64_t cols) {
  __shared__ float scratch[32];
  float* dw_part = dw_ws != nullptr ? dw_ws + blockIdx.x * cols : nullptr;
  float* db_part = db_ws != nullptr ? db_ws + blockIdx.x * cols : nullptr;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    if (dw_part != nullptr) dw_part[c] = 0.0f;
    if (db_part != nullptr) db_part[c] = 0.0f;
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    const float m = mean[r], s = rstd[r];
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (x[base + c] - m) * s, d = dy[base + c], g = d * w[c];
      g_sum += g;
      gx_sum += g * xhat;
      if (dw_part != nullptr) dw_part[c] += d * xhat;
      if (db_part != nullptr) db_part[c] += d;
    }
    const float c1 = block_sum(g_sum, scratch) / static_cast<float>(cols);
    const float c2 = block_sum(gx_sum, scratch) / static_cast<float>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (x[base + c] - m) * s;
      const float d = s * (dy[base + c] * w[c] - c1 - xhat * c2);
      dx[base + c] = d_sum != nullptr ? d + d_sum[base + c] : d;
    }
  }
}

template <class T>
int rms_backward(const T* x, const T* w, const T* dy, const float* d_sum, const float* rstd, T* dx, T* dw,
                 float* workspace, int64_t rows, int64_t cols, Stream stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t blocks = norm_backward_blocks(rows);
  rms_backward_kernel<T><<<blocks, kRowThreads, 0, s>>>(x, w, dy, d_sum, rstd, dx, dw != nullptr ? workspace : nullptr,
                                                         rows, cols);
  if (dw != nullptr) launch_column_sum<T>(workspace, blocks, cols, dw, s);
  return launch_error();
}

}  // namespace

const char* error_text(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int64_t norm_backward_blocks(int64_t rows) { return cuda::grid_for_rows(rows, 512); }

int rms_norm_forward(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                     int64_t rows, int64_t cols, float eps, Stream stream) {
  rms_forward_kernel<float><<<grid_for_rows(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, residual, sum, w, y, rstd, rows, cols, eps);
  return launch_error();
}

int rms_norm_forward_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows, int64_t cols,
                          float eps, Stream stream) {
  rms_forward_kernel<uint16_t><<<grid_for_rows(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, nullptr, nullptr, w, y, rstd, rows, cols, eps);
  return launch_error();
}

int rms_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd, float* dx,
                      float* dw, float* workspace, int64_t rows, int64_t cols, Stream stream) {
  return rms_backward<float>(x, w, dy, d_sum, rstd, dx, dw, workspace, rows, cols, stream);
}

int rms_norm_backward_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                           uint16_t* dw, float* workspace, int64_t rows, int64_t cols, Stream stream) {
  return rms_backward<uint16_t>(x, w, dy, nullptr, rstd, dx, dw, workspace, rows, cols, stream);
}

int layer_norm_forward(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                       float* mean, float* rstd, int64_t rows, int64_t cols, float eps, Stream stream) {
  layer_forward_kernel<<<grid_for_rows(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, residual, sum, w, b, y, mean, rstd, rows, cols, eps);
  return launch_error();
}

int layer_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                        const float* rstd, float* dx, float* dw, float* db, float* workspace, int64_t rows, int64_t cols,
                        Stream stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t blocks = norm_backward_blocks(rows);
  float* dw_ws = dw != nullptr ? workspace : nullptr;
  float* db_ws = db != nullptr ? workspace + blocks * cols : nullptr;
  layer_backward_kernel<<<blocks, kRowThreads, 0, s>>>(x, w, dy, d_sum, mean, rstd, dx, dw_ws, db_ws, rows, cols);
  if (dw != nullptr) launch_column_sum<float>(dw_ws, blocks, cols, dw, s);
  if (db != nullptr) launch_column_sum<float>(db_ws, blocks, cols, db, s);
  return launch_error();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
