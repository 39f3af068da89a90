// MemoryTracker: HF's TrainerMemoryTracker for CPU memory. Per stage (init, train, eval, test) it
// records the process RSS at start and end and the peak in between, and reports
//   <stage>_mem_cpu_alloc_delta  = RSS at end - RSS at start (may be negative)
//   <stage>_mem_cpu_peaked_delta = max(0, peak RSS during the stage - RSS at end)
// in bytes. The init figures (and before_init_mem_cpu, the RSS when init began) are added to the
// metrics of the first stage reported after init, as HF does. A stage started while another runs
// (evaluation inside training) is ignored. RSS comes from /proc/self/statm; the peak is sampled by a
// background thread (every millisecond) and, where the kernel lets the process reset its high-water
// mark (/proc/self/clear_refs), also read from VmHWM (/proc/self/status), which catches peaks shorter
// than the sampling interval (the thread then samples every 10 ms). Resetting VmHWM is process-wide:
// code that wants the peak of the whole process should sample it itself.
// On a GPU (set_gpu) it also reports HF's GPU figures from the caching allocator's counters:
//   <stage>_mem_gpu_alloc_delta  = allocated at end - allocated at start
//   <stage>_mem_gpu_peaked_delta = max(0, peak allocated during the stage - allocated at end)
// (and before_init_mem_gpu), resetting the peak and releasing cached blocks at each start as HF does.
// Without a GPU those keys are absent.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace hftrain {

// One GPU's allocator counters (HF: torch.cuda.memory_allocated, max_memory_allocated,
// reset_peak_memory_stats, empty_cache). The CUDA implementation is dist/device_probe.h's.
class GpuMemoryCounters {
 public:
  virtual ~GpuMemoryCounters() = default;
  virtual int64_t allocated() = 0;
  virtual int64_t peak_allocated() = 0;
  virtual void reset_peak() = 0;
  virtual void release_cached() = 0;
};

class MemoryTracker {
 public:
  struct Figures {
    int64_t begin = 0, end = 0, peak = 0;
    int64_t alloc() const { return end - begin; }
    int64_t peaked() const { return peak > end ? peak - end : 0; }
  };

  // enabled = !skip_memory_metrics. use_kernel_peak = false keeps only the sampling thread (tests).
  explicit MemoryTracker(bool enabled = true, bool use_kernel_peak = true);
  ~MemoryTracker();
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // The GPU whose memory is reported beside the process's (nullptr: none, the CPU default).
  void set_gpu(std::shared_ptr<GpuMemoryCounters> gpu) { gpu_ = std::move(gpu); }

  void start(const std::string& stage);
  void stop(const std::string& stage);
  // Adds this stage's (and, the first time, init's) figures to `metrics`.
  void update_metrics(const std::string& stage, nlohmann::json& metrics);
  void stop_and_update_metrics(const std::string& stage, nlohmann::json& metrics);

  bool enabled() const { return enabled_; }
  const std::map<std::string, Figures>& figures() const { return figures_; }
  const std::map<std::string, Figures>& gpu_figures() const { return gpu_figures_; }

  // Resident set size of this process in bytes (0 when /proc is unavailable).
  static int64_t current_rss();

 private:
  void stop_sampler();

  bool enabled_;
  bool use_kernel_peak_;
  bool kernel_peak_reset_ = false;
  bool init_reported_ = false;
  std::string current_stage_;
  int64_t start_rss_ = 0;
  std::map<std::string, Figures> figures_;
  std::shared_ptr<GpuMemoryCounters> gpu_;
  int64_t gpu_start_ = 0;
  std::map<std::string, Figures> gpu_figures_;

  std::thread sampler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool sampling_ = false;
  std::atomic<int64_t> sampled_peak_{0};
};

}  // namespace hftrain
