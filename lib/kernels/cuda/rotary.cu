// Rotary position embedding on a CUDA device (see kernels/rotary.h, whose pair function both the host loop and this
// kernel call): one pair of rotated dims (or one copied dim) per thread, grid-stride over every row.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/rotary.h"

namespace hftrain {
namespace kernels {
namespace cuda {
namespace {

template <RowType X, RowType Tab, RowType Out>
__global__ void rotary_kernel(RotaryRows p, int64_t items_per_row, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    rotary_pair<X, Tab, Out>(p, rotary_row_start(p, i / items_per_row), i % items_per_row);
}

struct DeviceRows {
  const RotaryRows& p;
  cudaStream_t stream;
  template <RowType X, RowType Tab, RowType Out>
  void run() const {
    const int64_t items = rotary_items_per_row(p), n = p.batch * p.heads * p.tokens * items;
    if (n == 0) return;
    rotary_kernel<X, Tab, Out><<<grid_for_items(n, 16384), kRowThreads, 0, stream>>>(p, items, n);
  }
};

}  // namespace

int rotary_rows(const RotaryRows& p, Stream stream) {
  DeviceRows rows{p, static_cast<cudaStream_t>(stream)};
  rotary_dispatch(p, rows);
  return launch_error();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
