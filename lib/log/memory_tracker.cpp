// MemoryTracker (see memory_tracker.h). Semantics of HF transformers trainer_utils.TrainerMemoryTracker.
#include "log/memory_tracker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hftrain {
namespace {

// Sampling period of the peak: every millisecond, or every 10 when the kernel's high-water mark
// already catches short peaks (fewer wake-ups competing with the compute threads).
constexpr auto kSampleInterval = std::chrono::milliseconds(1);
constexpr auto kSampleIntervalWithKernelPeak = std::chrono::milliseconds(10);

// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS; false where not permitted.
bool reset_kernel_peak() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

int64_t kernel_peak() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream ss(line.substr(6));
      int64_t kb = 0;
      ss >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

int64_t MemoryTracker::current_rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

MemoryTracker::MemoryTracker(bool enabled, bool use_kernel_peak) : enabled_(enabled), use_kernel_peak_(use_kernel_peak) {}

MemoryTracker::~MemoryTracker() { stop_sampler(); }

void MemoryTracker::start(const std::string& stage) {
  if (!enabled_) return;
  if (!current_stage_.empty()) return;  // nested (e.g. eval inside train): ignored, as HF does
  current_stage_ = stage;
  if (gpu_) {  // HF: reset_peak_memory_stats, empty_cache, then memory_allocated
    gpu_->reset_peak();
    gpu_->release_cached();
    gpu_start_ = gpu_->allocated();
  }
  start_rss_ = current_rss();
  kernel_peak_reset_ = use_kernel_peak_ && reset_kernel_peak();
  sampled_peak_ = start_rss_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sampling_ = true;
  }
  const auto interval = kernel_peak_reset_ ? kSampleIntervalWithKernelPeak : kSampleInterval;
  sampler_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (sampling_) {
      const int64_t rss = current_rss();
      if (rss > sampled_peak_) sampled_peak_ = rss;
      wake_.wait_for(lock, interval, [this] { return !sampling_; });
    }
  });
}

void MemoryTracker::stop_sampler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sampling_ = false;
  }
  wake_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

void MemoryTracker::stop(const std::string& stage) {
  if (!enabled_ || current_stage_ != stage) return;
  stop_sampler();
  Figures f;
  f.begin = start_rss_;
  f.end = current_rss();
  f.peak = std::max<int64_t>(sampled_peak_, f.end);
  if (kernel_peak_reset_) f.peak = std::max(f.peak, kernel_peak());
  figures_[stage] = f;
  if (gpu_) {  // HF: empty_cache, then memory_allocated and max_memory_allocated
    gpu_->release_cached();
    Figures g;
    g.begin = gpu_start_;
    g.end = gpu_->allocated();
    g.peak = gpu_->peak_allocated();
    gpu_figures_[stage] = g;
  }
  current_stage_.clear();
}

void MemoryTracker::update_metrics(const std::string& stage, nlohmann::json& metrics) {
  if (!enabled_) return;
  if (!current_stage_.empty() && current_stage_ != stage) return;
  std::vector<std::string> stages{stage};
  if (!init_reported_) {
    stages.insert(stages.begin(), "init");
    init_reported_ = true;
  }
  for (const auto& s : stages) {
    auto it = figures_.find(s);
    if (it == figures_.end()) continue;
    metrics[s + "_mem_cpu_alloc_delta"] = it->second.alloc();
    metrics[s + "_mem_cpu_peaked_delta"] = it->second.peaked();
    auto g = gpu_figures_.find(s);
    if (g == gpu_figures_.end()) continue;
    metrics[s + "_mem_gpu_alloc_delta"] = g->second.alloc();
    metrics[s + "_mem_gpu_peaked_delta"] = g->second.peaked();
  }
  if (stages.front() == "init" && figures_.count("init")) metrics["before_init_mem_cpu"] = figures_.at("init").begin;
  if (stages.front() == "init" && gpu_figures_.count("init")) metrics["before_init_mem_gpu"] = gpu_figures_.at("init").begin;
}

void MemoryTracker::stop_and_update_metrics(const std::string& stage, nlohmann::json& metrics) {
  stop(stage);
  update_metrics(stage, metrics);
}

}  // namespace hftrain
