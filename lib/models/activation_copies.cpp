// Activation-checkpoint offload's copies, on a side CUDA stream where the input is on a GPU (see
// activation_copies.h).
#include "models/activation_copies.h"

#if HFTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#endif

#include <atomic>

namespace hftrain {
namespace {

std::atomic<int64_t> copy_delay_cycles{0};  // delay_cuda_offload_copies

#if HFTRAIN_WITH_CUDA
// One side stream per device for every offload copy, so that a backward copy is queued after the forward copy of
// the same input (the host memory it reads is then complete).
c10::cuda::CUDAStream side_stream(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = streams.find(device);
  if (found == streams.end()) found = streams.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
  return found->second;
}

// The tests' delay on the side stream (current here) before a copy.
void delay_for_tests() {
  if (const int64_t cycles = copy_delay_cycles.load()) at::cuda::sleep(cycles);
}

// `later` waits (on the device) for the work queued on `earlier` so far.
void wait_for(const c10::cuda::CUDAStream& later, const c10::cuda::CUDAStream& earlier) {
  at::cuda::CUDAEvent queued;
  queued.record(earlier);
  queued.block(later);
}

torch::Tensor cuda_copy_to_host(const torch::Tensor& x) {
  const c10::DeviceIndex device = x.device().index();
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device), side = side_stream(device);
  wait_for(side, compute);  // x is produced
  torch::Tensor host = torch::empty(x.sizes(), x.options().device(torch::kCPU).pinned_memory(true));
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    delay_for_tests();
    host.copy_(x.detach(), /*non_blocking=*/true);
  }
  x.record_stream(side);  // x's memory is not handed to other work until the copy has read it
  return host;
}

torch::Tensor cuda_copy_back(const torch::Tensor& kept, const torch::Device& device) {
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index()), side = side_stream(device.index());
  // Allocated on the compute stream, whose pool it returns to; written on the side stream, after the forward's copy
  // of the same input there.
  torch::Tensor back = torch::empty(kept.sizes(), kept.options().device(device).pinned_memory(false));
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    delay_for_tests();
    back.copy_(kept, /*non_blocking=*/true);
  }
  back.record_stream(side);
  wait_for(compute, side);
  return back;
}
#endif

}  // namespace

torch::Tensor copy_to_host(const torch::Tensor& x) {
#if HFTRAIN_WITH_CUDA
  if (x.device().is_cuda()) return cuda_copy_to_host(x);
#endif
  torch::Tensor host = torch::empty(x.sizes(), x.options().device(torch::kCPU));
  host.copy_(x.detach());
  return host;
}

void delay_cuda_offload_copies(int64_t cycles) { copy_delay_cycles.store(cycles); }

torch::Tensor copy_back(const torch::Tensor& kept, const torch::Device& device) {
  if (kept.device() == device) return kept;
#if HFTRAIN_WITH_CUDA
  if (device.is_cuda() && kept.device().is_cpu()) return cuda_copy_back(kept, device);
#endif
  return kept.to(device);
}

}  // namespace hftrain
