// Torch's lazy tensor device for the device tests: its TorchScript backend ships in every LibTorch and
// computes on the CPU, but its tensors hold no host memory and do not mix with CPU tensors, so code that
// would only work on the host (data pointers, CPU-built buffers, CPU-only collectives) shows up on it the
// way it would on a GPU. The CPU build has no other device to compute on.
#pragma once

#include <mutex>

#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>
#include <torch/torch.h>

namespace hftrain_test {

inline torch::Device lazy_device() {
  static std::once_flag started;
  std::call_once(started, [] { torch::lazy::InitTorchScriptBackend(); });
  return torch::Device(torch::kLazy, 0);
}

}  // namespace hftrain_test
