// The profiler callback (see profiler_callback.h).
#include "train/profiler_callback.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "distributed/comm.h"
#include "log/logger.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

namespace profiling = torch::autograd::profiler;
namespace profiler_impl = torch::profiler::impl;

// LibTorch 2.x times its events in nanoseconds (startNs), 1.13 in microseconds (startUs): one source for both.
template <typename E, typename = void>
struct TimesInNs : std::false_type {};
template <typename E>
struct TimesInNs<E, std::void_t<decltype(std::declval<const E&>().startNs())>> : std::true_type {};

template <typename E>
double start_us(const E& e) {
  if constexpr (TimesInNs<E>::value) return static_cast<double>(e.startNs()) / 1000.0;
  else return static_cast<double>(e.startUs());
}

template <typename E, typename = void>
struct DurationInNs : std::false_type {};
template <typename E>
struct DurationInNs<E, std::void_t<decltype(std::declval<const E&>().durationNs())>> : std::true_type {};

template <typename E>
double duration_us(const E& e) {
  if constexpr (DurationInNs<E>::value) return static_cast<double>(e.durationNs()) / 1000.0;
  else return static_cast<double>(e.durationUs());
}

std::set<profiler_impl::ActivityType> activities() {
  std::set<profiler_impl::ActivityType> kinds{profiler_impl::ActivityType::CPU};
  if (torch::cuda::is_available()) kinds.insert(profiler_impl::ActivityType::CUDA);
  return kinds;
}

struct Totals {
  int64_t calls = 0;
  double us = 0;
};

// One table of `totals` (name -> calls and time), the longest first, with each name's share of `window_us`.
std::string table(const std::string& title, const std::map<std::string, Totals>& totals, double window_us) {
  std::vector<std::pair<std::string, Totals>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::ostringstream out;
  out << title << "\n" << "  total_us      calls   mean_us  share  name\n";
  for (const auto& [name, t] : rows) {
    char line[96];
    std::snprintf(line, sizeof line, "%10.0f %10lld %9.1f %5.1f%%  ", t.us, static_cast<long long>(t.calls),
                  t.us / static_cast<double>(std::max<int64_t>(1, t.calls)), window_us > 0 ? 100.0 * t.us / window_us : 0.0);
    out << line << name << "\n";
  }
  return out.str();
}

}  // namespace

void ProfilerCallback::Options::declare(Schema<Options>& s) {
  s.add("wait", &Options::wait, "Optimizer steps run before the profiler starts (torch.profiler.schedule's wait).").min(0);
  s.add("warmup", &Options::warmup, "Steps profiled and discarded (schedule's warmup).").min(0);
  s.add("active", &Options::active, "Steps profiled and written (schedule's active).").min(1);
  s.add("record_shapes", &Options::record_shapes, "Record the operators' input shapes (profile's record_shapes).");
}

ProfilerCallback::ProfilerCallback(const Options& options, const CallbackContext& context)
    : options_(options), folder_(context.output_dir + "/profile"), rank_(world().rank()),
      kept_from_(options.wait + options.warmup + 1) {}

ProfilerCallback::~ProfilerCallback() {
  if (!running_) return;
  try {
    profiling::disableProfiler();  // an aborted run: nothing is written
  } catch (...) {  // a destructor must not throw
  }
}

// Steps count from the first this callback sees (a resumed run's first step is 1 of its window), as
// torch.profiler counts from its start.
void ProfilerCallback::on_step_begin(const TrainerState& s, TrainerControl&) {
  if (first_step_ < 0) {
    first_step_ = s.global_step;
    kept_from_ += first_step_;
  }
  const int64_t step = s.global_step + 1;  // the step about to run
  if (!prepared_ && step == first_step_ + options_.wait + 1) prepare();  // warm-up: the profiler set up, not recording
  if (!running_ && step == kept_from_) start();
}

void ProfilerCallback::on_step_end(const TrainerState& s, TrainerControl&) {
  // The window's last step, or the run's: what comes after (the final save, load_best_model_at_end) is not a step.
  if (running_ && (s.global_step == kept_from_ + options_.active - 1 || (s.max_steps > 0 && s.global_step >= s.max_steps)))
    stop(s.global_step);
}

void ProfilerCallback::on_train_end(const TrainerState& s, TrainerControl&) {
  if (running_) stop(s.global_step);  // stopped early (a signal, early stopping): keep what the window profiled
}

profiler_impl::ProfilerConfig ProfilerCallback::config() const {
  return profiler_impl::ProfilerConfig(profiler_impl::ProfilerState::KINETO, options_.record_shapes);
}

void ProfilerCallback::prepare() {
  profiling::prepareProfiler(config(), activities());
  prepared_ = true;
}

void ProfilerCallback::start() {
  if (!prepared_) prepare();
  profiling::enableProfiler(config(), activities());
  running_ = true;
}

void ProfilerCallback::stop(int64_t last_step) {
  if (torch::cuda::is_available()) torch::cuda::synchronize();  // the kernels still queued belong to the window
  const std::unique_ptr<profiling::ProfilerResult> result = profiling::disableProfiler();
  running_ = false;
  if (!result) return;
  std::map<std::string, Totals> host, device;
  double first = -1, last = 0;
  for (const auto& e : result->events()) {
    const double begin = start_us(e);
    first = first < 0 ? begin : std::min(first, begin);
    last = std::max(last, begin + duration_us(e));
  }
  std::ostringstream trace;
  trace << "{\"traceEvents\": [";
  bool comma = false;
  for (const auto& e : result->events()) {
    const bool on_device = e.deviceType() != c10::DeviceType::CPU;
    Totals& t = (on_device ? device : host)[e.name()];
    t.calls += 1;
    t.us += duration_us(e);
    trace << (comma ? ",\n" : "\n") << nlohmann::json{{"name", e.name()}, {"ph", "X"}, {"ts", start_us(e) - first},
                                                     {"dur", duration_us(e)}, {"pid", on_device ? 1 : 0},
                                                     {"tid", on_device ? e.deviceResourceId() : static_cast<int64_t>(e.startThreadId())}}
                                                        .dump();
    comma = true;
  }
  trace << "\n]}\n";
  std::filesystem::create_directories(folder_);
  const std::string suffix = "_rank" + std::to_string(rank_);
  write_file_atomic(folder_ + "/trace" + suffix + ".json", trace.str());
  const double window = last - first;
  std::ostringstream summary;
  summary << "steps " << kept_from_ << ".." << last_step << " (window " << window << " us; an event's time includes the "
          << "events nested in it, so the shares do not add up to 100 %)\n\n"
          << table("host operators", host, window) << "\n" << table("device kernels", device, window);
  write_file_atomic(folder_ + "/summary" + suffix + ".txt", summary.str());
  if (rank_ == 0)
    log_info("profiler: steps " + std::to_string(kept_from_) + ".." + std::to_string(last_step) + " written to " + folder_);
}

}  // namespace hftrain
