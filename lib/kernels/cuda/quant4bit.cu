// 4-bit (NF4 / FP4) and 8-bit block-wise dequantisation on a CUDA device (see launch.h; the layout and formulas are
// kernels/quant4bit.h's, whose element functions both the host and these kernels call): one element per thread,
// grid-stride, each the float32 product code value * absmax (rounded to bf16 for the bf16 output), so a tile
// dequantised here has the host kernels' bits.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/half_convert.h"
#include "kernels/quant4bit.h"

namespace hftrain {
namespace kernels {
namespace cuda {
namespace {

__device__ __forceinline__ void put(float* out, float v) { *out = v; }
__device__ __forceinline__ void put(uint16_t* out, float v) { *out = simd::float_to_bf16(v); }

template <class T>
__global__ void dequantize_4bit_kernel(const uint8_t* packed, const float* absmax, const float* code, int64_t block,
                                       int64_t begin, int64_t end, T* out) {
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    put(out + (i - begin), code[quant4_nibble_at(packed, i)] * absmax[i / block]);
}

__global__ void dequantize_8bit_kernel(const uint8_t* codes, int64_t n, int64_t block, const float* map,
                                       const float* absmax, float offset, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = dequantized_8bit(codes, map, absmax, block, offset, i);
}

int64_t grid_for(int64_t n) { return grid_for_items(n, 8192); }

}  // namespace

int dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                    int64_t end, float* out, Stream stream) {
  if (end > begin)
    dequantize_4bit_kernel<float><<<grid_for(end - begin), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        packed, absmax, code, block, begin, end, out);
  return launch_error();
}

int dequantize_4bit_bf16(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                         int64_t end, uint16_t* out, Stream stream) {
  if (end > begin)
    dequantize_4bit_kernel<uint16_t><<<grid_for(end - begin), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        packed, absmax, code, block, begin, end, out);
  return launch_error();
}

int dequantize_8bit_blockwise(const uint8_t* codes, int64_t n, int64_t block, const float* map, const float* absmax,
                              float offset, float* out, Stream stream) {
  if (n > 0)
    dequantize_8bit_kernel<<<grid_for(n), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(codes, n, block, map,
                                                                                                absmax, offset, out);
  return launch_error();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
