// Token cross-entropy over rows of fp32 logits on a CUDA device (see launch.h; the host kernel is
// kernels/cross_entropy.h): one block per row at a time, the row's max and sum of exponentials by block
// reductions, the loss (1 - eps)(lse - z[label]) + eps (lse - mean z), and the gradient
// scale (softmax(z) - (1 - eps) onehot(label) - eps / vocab) written over the logits.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hftrain {
namespace kernels {
namespace cuda {
namespace {

__global__ void cross_entropy_kernel(CrossEntropyRows p, float* row_loss, unsigned long long* bad_row) {
  __shared__ float scratch[32];
  const float vocab = static_cast<float>(p.vocab);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    float* z = p.logits + r * p.vocab;
    const int64_t label = p.labels[r];
    if (label == p.ignore_index) {
      if (threadIdx.x == 0) row_loss[r] = 0.0f;
      if (p.gradient)
        for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) z[c] = 0.0f;
      continue;
    }
    if (label < 0 || label >= p.vocab) {
      if (threadIdx.x == 0) {
        row_loss[r] = NAN;
        atomicMin(bad_row, static_cast<unsigned long long>(r));
      }
      continue;
    }
    const float z_label = z[label];  // read by every thread before any of them writes the gradient
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) m = fmaxf(m, z[c]);
    m = block_max(m, scratch);
    float e = 0.0f, total = 0.0f;
    for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) {
      e += expf(z[c] - m);
      total += z[c];
    }
    const float lse = m + logf(block_sum(e, scratch));
    const float mean_z = p.epsilon != 0.0f ? block_sum(total, scratch) / vocab : 0.0f;
    if (threadIdx.x == 0)
      row_loss[r] = (1.0f - p.epsilon) * (lse - z_label) + (p.epsilon != 0.0f ? p.epsilon * (lse - mean_z) : 0.0f);
    if (!p.gradient) continue;
    const float smooth = p.epsilon / vocab;
    for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) {
      const float target = c == label ? 1.0f - p.epsilon : 0.0f;
      z[c] = p.scale * (expf(z[c] - lse) - target - smooth);
    }
  }
}

}  // namespace

int cross_entropy_rows(const CrossEntropyRows& p, float* row_loss, unsigned long long* bad_row, Stream stream) {
  const int64_t grid = std::max<int64_t>(1, std::min<int64_t>(p.rows, 8192));
  cross_entropy_kernel<<<grid, kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(p, row_loss, bad_row);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
