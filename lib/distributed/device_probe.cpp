// LibTorch device probe and CUDA memory counters (see device_probe.h). The only file with CUDA calls.
#include "distributed/device_probe.h"

#include "util/error.h"
#include "util/torch_compat.h"

#if HFTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hftrain {
namespace {

#if !HFTRAIN_WITH_CUDA
[[noreturn]] void no_cuda(const std::string& what) {
  throw RuntimeFailure(what + ": this build's LibTorch has no CUDA");
}
#else
void check_index(int index) {
  const int n = static_cast<int>(torch::cuda::device_count());
  if (index < 0 || index >= n)
    throw RuntimeFailure("cuda:" + std::to_string(index) + " does not exist (this process sees " + std::to_string(n) +
                         " GPUs)");
}

// The caching allocator's counters of one device, as torch.cuda.memory_stats reports them ("all" pool).
class CudaMemoryCounters : public GpuMemoryCounters {
 public:
  // The caching allocator has no per-device state until CUDA is initialised (PyTorch's memory_stats
  // initialises it first): one small allocation does that.
  explicit CudaMemoryCounters(int index) : index_(index) { torch::empty({1}, torch::Device(torch::kCUDA, index)); }
  int64_t allocated() override { return allocated_bytes().current; }
  int64_t peak_allocated() override { return allocated_bytes().peak; }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }
  void release_cached() override { c10::cuda::CUDACachingAllocator::emptyCache(); }

 private:
  // The "all pools" counter (StatType::AGGREGATE) of allocated bytes.
  std::decay_t<decltype(c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0])> allocated_bytes() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(index_).allocated_bytes[0];
  }
  int index_;
};
#endif

}  // namespace

int TorchDeviceProbe::gpu_count() const {
  if constexpr (!kCudaBuild) return 0;
  return static_cast<int>(torch::cuda::device_count());
}

std::string TorchDeviceProbe::gpu_name(int index) const {
#if HFTRAIN_WITH_CUDA
  check_index(index);
  return at::cuda::getDeviceProperties(index)->name;
#else
  no_cuda("the name of cuda:" + std::to_string(index));
#endif
}

int64_t TorchDeviceProbe::gpu_total_memory(int index) const {
#if HFTRAIN_WITH_CUDA
  check_index(index);
  return static_cast<int64_t>(at::cuda::getDeviceProperties(index)->totalGlobalMem);
#else
  no_cuda("the memory of cuda:" + std::to_string(index));
#endif
}

void set_current_gpu(int index) {
#if HFTRAIN_WITH_CUDA
  check_index(index);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  no_cuda("selecting cuda:" + std::to_string(index));
#endif
}

c10::Device torch_device_of(const DeviceChoice& choice) {
  if (choice.on_gpu()) return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(choice.cuda_index));
  return c10::Device(c10::DeviceType::CPU);
}

std::shared_ptr<GpuMemoryCounters> cuda_memory_counters(int index) {
#if HFTRAIN_WITH_CUDA
  check_index(index);
  return std::make_shared<CudaMemoryCounters>(index);
#else
  (void)index;
  return nullptr;
#endif
}

}  // namespace hftrain
