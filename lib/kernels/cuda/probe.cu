// Whether this build's CUDA kernels can run on the current device (see launch.h): loads a kernel compiled with the
// same flags as all of them, which fails when the driver is older than the CUDA runtime they were built against or
// when the device's architecture is not among HFTRAIN_CUDA_ARCHITECTURES.
#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

namespace hftrain {
namespace kernels {
namespace cuda {

namespace {

__global__ void probe_kernel(int* out) {
  if (out != nullptr) *out = 1;
}

}  // namespace

int kernels_loadable() {
  int device_count = 0;
  cudaError_t code = cudaGetDeviceCount(&device_count);
  if (code == cudaSuccess) {
    cudaFuncAttributes attributes{};
    code = cudaFuncGetAttributes(&attributes, probe_kernel);
  }
  if (code != cudaSuccess) cudaGetLastError();  // not sticky: clear it so that later launches do not see it
  return static_cast<int>(code);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace hftrain
