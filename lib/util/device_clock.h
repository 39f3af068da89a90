// Wall-clock seconds of work that may still be queued on a device: a GPU runs kernels after the host has
// moved on, so the clock is read once the device has finished what was queued (as torch.cuda.synchronize()
// before time.time()). On the host it is the plain clock.
#pragma once

#include <chrono>

#include <torch/types.h>

namespace hftrain {

using SteadyTime = std::chrono::steady_clock::time_point;

// Blocks until `device` has finished its queued work (nothing to do on the CPU).
void synchronize_device(const torch::Device& device);
// Seconds from `start` to now, `device` synchronised first.
double seconds_since(SteadyTime start, const torch::Device& device);

}  // namespace hftrain
