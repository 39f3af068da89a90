// The LibTorch side of device selection: the DeviceProbe that asks this process's LibTorch (torch::cuda)
// and the GPU memory counters of HF's memory metrics. Every CUDA call of hftrain is in device_probe.cpp,
// compiled only under HFTRAIN_WITH_CUDA (util/torch_compat.h); on a build without CUDA the probe sees no
// GPU and there are no GPU memory counters.
#pragma once

#include <memory>

#include <c10/core/Device.h>

#include "distributed/devices.h"
#include "log/memory_tracker.h"

namespace hftrain {

class TorchDeviceProbe : public DeviceProbe {
 public:
  int gpu_count() const override;
  std::string gpu_name(int index) const override;
  int64_t gpu_total_memory(int index) const override;
};

// Makes cuda:`index` this process's current device (torch.cuda.set_device). RuntimeFailure without CUDA.
void set_current_gpu(int index);

// The torch device of a worker's choice: cuda:i or cpu.
c10::Device torch_device_of(const DeviceChoice& choice);

// HF's torch.cuda.memory_allocated / max_memory_allocated / reset_peak_memory_stats / empty_cache for
// cuda:`index` (the caching allocator's counters); nullptr on a build without CUDA.
std::shared_ptr<GpuMemoryCounters> cuda_memory_counters(int index);

}  // namespace hftrain
