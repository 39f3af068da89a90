// Token cross-entropy over rows of fp32 logits on a CUDA device (see launch.h; the host kernel is
// kernels/cross_entropy.h, whose arithmetic this follows): one block per row at a time, the row's max and sum of
// exponentials by block reductions, the loss (1 - eps)(lse - z[label]) + eps (lse - mean z) with lse - z taken as
// (m - z) + log(total), and the gradient scale (softmax(z) - (1 - eps) onehot(label) - eps / vocab) written over the
// logits.
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
    float e = 0.0f, sum_z = 0.0f;
    for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) {
      e += expf(z[c] - m);
      sum_z += z[c];
    }
    // lse - z = (m - z) + log(total), as the host kernel takes it: the difference of the two large numbers exactly
    // first, so large logits keep the loss's digits (lse itself is never rounded to a float).
    const float total = block_sum(e, scratch), log_total = logf(total);
    const float mean_z = p.epsilon != 0.0f ? block_sum(sum_z, scratch) / vocab : 0.0f;
    if (threadIdx.x == 0)
      row_loss[r] = (1.0f - p.epsilon) * ((m - z_label) + log_total) +
                    (p.epsilon != 0.0f ? p.epsilon * ((m - mean_z) + log_total) : 0.0f);
    if (!p.gradient) continue;
    // scale (e^(z - m) / total - eps / vocab), the label's less scale (1 - eps).
    const float factor = p.scale / total, shift = p.scale * p.epsilon / vocab;
    for (int64_t c = threadIdx.x; c < p.vocab; c += blockDim.x) {
      const float g = expf(z[c] - m) * factor - shift;
      z[c] = c == label ? g - p.scale * (1.0f - p.epsilon) : g;
    }
  }
}

}  // namespace

int cross_entropy_rows(const CrossEntropyRows& p, float* row_loss, unsigned long long* bad_row, Stream stream) {
  cross_entropy_kernel<<<grid_for_rows(p.rows, 8192), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(p, row_loss,
                                                                                                           bad_row);
  return launch_error();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
