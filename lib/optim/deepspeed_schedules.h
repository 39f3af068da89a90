// DeepSpeed's `WarmupLR`, `WarmupDecayLR` and `WarmupCosineLR` (deepspeed/runtime/lr_schedules.py), stepped once per
// optimizer step as the DeepSpeed engine does. With it = the scheduler's last_batch_iteration:
//   lr = warmup_min_lr + (warmup_max_lr - warmup_min_lr) * gamma(it)
//   gamma(it) = log(it + 1) / log(Wd)  (warmup_type log)  or  it / Wd  (linear)   while it < Wd
//             = 1                                     (WarmupLR, after warmup)
//             = max(0, (total_num_steps - it) / max(1, total_num_steps - Wd))   (WarmupDecayLR)
// with Wd = max(2, warmup_num_steps). The scheduler starts at warmup_min_lr (it = -1) and steps after
// each optimizer step, so the optimizer step at global step s runs at it = s - 1 (s >= 1) and at
// warmup_min_lr for s = 0 -- which equals gamma(0) = 0 anyway. lr(s) below is that value, which is
// also what get_last_lr() reports after s steps. Unset options are filled as HF fills "auto":
// warmup_max_lr = training.learning_rate, warmup_num_steps = the run's warmup steps,
// total_num_steps = the run's total steps.
#pragma once

#include <optional>
#include <string>

#include "optim/schedule.h"

namespace hftrain {

class DeepSpeedWarmupLR : public Schedule {
 public:
  struct Options {
    double warmup_min_lr = 0.0;
    std::optional<double> warmup_max_lr;
    std::optional<int64_t> warmup_num_steps;
    std::string warmup_type = "log";
    static void declare(Schema<Options>& s);
  };
  DeepSpeedWarmupLR(const Options& options, const ScheduleContext& context);
  double lr(int64_t step) const override;

 protected:
  // gamma(it) for it >= 0.
  virtual double gamma(int64_t it) const;
  double warmup_gamma(int64_t it) const;
  double min_lr_, max_lr_;
  int64_t warmup_num_steps_;
  bool log_warmup_;
};

class DeepSpeedWarmupDecayLR : public DeepSpeedWarmupLR {
 public:
  struct Options {
    double warmup_min_lr = 0.0;
    std::optional<double> warmup_max_lr;
    std::optional<int64_t> warmup_num_steps;
    std::string warmup_type = "log";
    std::optional<int64_t> total_num_steps;
    static void declare(Schema<Options>& s);
  };
  DeepSpeedWarmupDecayLR(const Options& options, const ScheduleContext& context);

 protected:
  double gamma(int64_t it) const override;

 private:
  int64_t total_num_steps_;
};

// WarmupCosineLR works in ratios of training.learning_rate (DeepSpeed's org_lrs): with Wd = max(2,
// warmup_num_steps),
//   ratio(it) = warmup_min_ratio + (1 - warmup_min_ratio) * [log(it + 1) / log(Wd) | it / Wd]   while it < Wd
//             = max(0, cos_min_ratio + (1 - cos_min_ratio) * (1 + cos(pi * (it - Wd + 1) / (total_num_steps - Wd))) / 2)
// (the denominator at least 1, as DeepSpeed's fix for total_num_steps == warmup_num_steps does). At it = -1
// DeepSpeed's get_lr() is 0, so the first optimizer step runs at lr 0; step s >= 1 runs at it = s - 1.
class DeepSpeedWarmupCosineLR : public Schedule {
 public:
  struct Options {
    std::optional<int64_t> total_num_steps;
    double warmup_min_ratio = 0.0;
    std::optional<int64_t> warmup_num_steps;
    double cos_min_ratio = 0.0001;
    std::string warmup_type = "log";
    static void declare(Schema<Options>& s);
  };
  DeepSpeedWarmupCosineLR(const Options& options, const ScheduleContext& context);
  double lr(int64_t step) const override;

 private:
  double ratio(int64_t it) const;
  Options options_;
  double base_lr_;
  int64_t warmup_num_steps_, total_num_steps_;
};

}  // namespace hftrain
