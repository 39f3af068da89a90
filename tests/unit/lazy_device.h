// Torch's lazy tensor device for the device tests: its TorchScript backend ships in every LibTorch and
// computes on the CPU, but its tensors hold no host memory and do not mix with CPU tensors, so code that
// would only work on the host (data pointers, CPU-built buffers, CPU-only collectives) shows up on it the
// way it would on a GPU. The CPU build has no other device to compute on. gpu_or: the GPU where there is one.
#pragma once

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>
#include <torch/torch.h>

namespace hftrain_test {

inline torch::Device lazy_device() {
  static std::once_flag started;
  std::call_once(started, [] { torch::lazy::InitTorchScriptBackend(); });
  return torch::Device(torch::kLazy, 0);
}

// cuda:0 when this build and machine have one, else `fallback`; HFTRAIN_REQUIRE_GPU=1 (scripts/gpu-check.sh) makes
// a CUDA build without a usable GPU fail here rather than quietly compare the host with itself.
inline torch::Device gpu_or(torch::Device fallback) {
#if HFTRAIN_WITH_CUDA
  if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, 0);
#endif
  const char* required = std::getenv("HFTRAIN_REQUIRE_GPU");
  if (required != nullptr && std::string(required) == "1")
    throw std::runtime_error("HFTRAIN_REQUIRE_GPU=1 but no CUDA device is usable here");
  return fallback;
}

}  // namespace hftrain_test
