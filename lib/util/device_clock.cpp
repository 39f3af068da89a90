// Device-synchronised clock reads (see device_clock.h).
#include "util/device_clock.h"

#include <torch/cuda.h>

namespace hftrain {

void synchronize_device(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double seconds_since(SteadyTime start, const torch::Device& device) {
  synchronize_device(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace hftrain
