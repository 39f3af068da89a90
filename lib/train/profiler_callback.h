// The `profiler` callback (issue 60's "then profile"): PyTorch's profiler around a window of optimizer steps, as
// torch.profiler.profile(schedule=schedule(wait, warmup, active, repeat=1)) in a Python loop, counting from the
// run's first step (a resumed run's included). Steps wait + 1 .. wait + warmup run with the profiler prepared but
// not recording (its set-up kept out of the window); steps wait + warmup + 1 .. wait + warmup + active are
// recorded. The window closes early at the run's last step. Each rank writes, in <output_dir>/profile/:
//   trace_rank<R>.json    the kept events as a Chrome trace (chrome://tracing, Perfetto): every operator on the
//                         host and, where LibTorch was built with Kineto and CUPTI, every kernel on the GPU;
//   summary_rank<R>.txt   per event name: calls, total and mean microseconds, and share of the window, host
//                         operators and device kernels in separate tables, the longest first.
// The device is synchronised before the window closes, so its kernels' times are complete.
#pragma once

#include <memory>
#include <string>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "config/schema.h"
#include "train/callbacks.h"

namespace hftrain {

class ProfilerCallback : public TrainerCallback {
 public:
  struct Options {
    int64_t wait = 1;    // steps run before the profiler starts
    int64_t warmup = 1;  // steps profiled and discarded
    int64_t active = 3;  // steps profiled and kept
    bool record_shapes = false;  // the operators' input shapes in the trace (torch.profiler's record_shapes)
    static void declare(Schema<Options>& s);
  };
  ProfilerCallback(const Options& options, const CallbackContext& context);
  ~ProfilerCallback() override;
  std::string name() const override { return "ProfilerCallback"; }
  void on_step_begin(const TrainerState& s, TrainerControl& c) override;
  void on_step_end(const TrainerState& s, TrainerControl& c) override;
  void on_train_end(const TrainerState& s, TrainerControl& c) override;
  // The folder the files go to.
  const std::string& folder() const { return folder_; }

 private:
  torch::profiler::impl::ProfilerConfig config() const;
  void prepare();
  void start();
  void stop(int64_t last_step);
  Options options_;
  std::string folder_;
  int rank_;
  bool prepared_ = false, running_ = false;
  int64_t first_step_ = -1;  // global_step when the first step began (0, or a resumed run's checkpoint step)
  int64_t kept_from_ = 0;    // the first kept step
};

}  // namespace hftrain
