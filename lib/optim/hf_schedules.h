// HF's LambdaLR schedules (transformers optimization.py; SchedulerType names): lr = base_lr *
// factor(step), with the shared warmup step / max(1, W) where a schedule has one. W = warmup steps,
// T = total steps, p = (step - W) / max(1, T - W). Options are HF's lr_scheduler_kwargs.
#pragma once

#include <optional>
#include <string>

#include "optim/schedule.h"

namespace hftrain {

// `linear`: warmup, then max(0, (T - s) / max(1, T - W)).
class LinearSchedule : public LambdaSchedule {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  LinearSchedule(const Options&, const ScheduleContext& context) : LambdaSchedule(context) {}
  double factor(int64_t step) const override;
};

// `cosine`: warmup, then max(0, 0.5 * (1 + cos(pi * num_cycles * 2 * p))).
class CosineSchedule : public LambdaSchedule {
 public:
  struct Options {
    double num_cycles = 0.5;
    static void declare(Schema<Options>& s);
  };
  CosineSchedule(const Options& options, const ScheduleContext& context) : LambdaSchedule(context), o_(options) {}
  double factor(int64_t step) const override;

 private:
  Options o_;
};

// `cosine_with_restarts`: warmup, then 0 once p >= 1, else max(0, 0.5 * (1 + cos(pi * ((num_cycles * p) mod 1)))).
class CosineWithRestartsSchedule : public LambdaSchedule {
 public:
  struct Options {
    double num_cycles = 1.0;
    static void declare(Schema<Options>& s);
  };
  CosineWithRestartsSchedule(const Options& options, const ScheduleContext& context)
      : LambdaSchedule(context), o_(options) {}
  double factor(int64_t step) const override;

 private:
  Options o_;
};

// `polynomial`: warmup, then ((lr_init - lr_end) * (1 - (s - W) / (T - W))^power + lr_end) / lr_init up to T,
// lr_end / lr_init beyond it (lr_init = learning_rate, which must exceed lr_end).
class PolynomialSchedule : public LambdaSchedule {
 public:
  struct Options {
    double lr_end = 1e-7;
    double power = 1.0;
    static void declare(Schema<Options>& s);
  };
  PolynomialSchedule(const Options& options, const ScheduleContext& context);
  double factor(int64_t step) const override;

 private:
  Options o_;
};

// `constant`: 1 (HF ignores warmup for it).
class ConstantSchedule : public LambdaSchedule {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  ConstantSchedule(const Options&, const ScheduleContext& context) : LambdaSchedule(context) {}
  double factor(int64_t) const override { return 1.0; }
};

// `constant_with_warmup`: warmup, then 1.
class ConstantWithWarmupSchedule : public LambdaSchedule {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  ConstantWithWarmupSchedule(const Options&, const ScheduleContext& context) : LambdaSchedule(context) {}
  double factor(int64_t step) const override;
};

// `inverse_sqrt`: warmup, then 1 / sqrt((s + timescale - W) / timescale); timescale defaults to W, or
// 10000 when W is 0. (HF's get_scheduler does not forward lr_scheduler_kwargs to this schedule, so HF
// always uses that default; setting timescale here is an extension.)
class InverseSqrtSchedule : public LambdaSchedule {
 public:
  struct Options {
    std::optional<int64_t> timescale;
    static void declare(Schema<Options>& s);
  };
  InverseSqrtSchedule(const Options& options, const ScheduleContext& context);
  double factor(int64_t step) const override;
  int64_t timescale() const { return timescale_; }

 private:
  int64_t timescale_;
};

// `cosine_with_min_lr`: warmup, then max(0, c * (1 - r) + r) with c the cosine factor and
// r = min_lr_rate, or min_lr / learning_rate; exactly one of min_lr and min_lr_rate must be set.
class CosineWithMinLrSchedule : public LambdaSchedule {
 public:
  struct Options {
    double num_cycles = 0.5;
    std::optional<double> min_lr;
    std::optional<double> min_lr_rate;
    static void declare(Schema<Options>& s);
  };
  CosineWithMinLrSchedule(const Options& options, const ScheduleContext& context);
  double factor(int64_t step) const override;

 private:
  double num_cycles_;
  double min_lr_rate_;
};

// `warmup_stable_decay` (HF get_wsd_schedule): warmup of warmup_type from min_lr_ratio to 1, a stable
// phase at 1 for num_stable_steps (default T - W - num_decay_steps), a decay of decay_type to
// min_lr_ratio over num_decay_steps, then min_lr_ratio.
class WarmupStableDecaySchedule : public LambdaSchedule {
 public:
  struct Options {
    int64_t num_decay_steps = 0;
    std::optional<int64_t> num_stable_steps;
    std::string warmup_type = "linear";
    std::string decay_type = "cosine";
    double min_lr_ratio = 0.0;
    double num_cycles = 0.5;
    static void declare(Schema<Options>& s);
  };
  WarmupStableDecaySchedule(const Options& options, const ScheduleContext& context);
  double factor(int64_t step) const override;

 private:
  Options o_;
  int64_t stable_steps_;
};

}  // namespace hftrain
