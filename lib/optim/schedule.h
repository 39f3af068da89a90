// Learning-rate schedules. lr(step) is the learning rate of the optimizer step taken at global step
// `step` (0-based), which is also what HF logs as learning_rate after `step` steps (the scheduler's
// get_last_lr()). Most schedules are pure functions of the step (HF's LambdaLR ones: base_lr *
// lambda(step); DeepSpeed's WarmupLR family); ReduceLROnPlateau instead reacts to evaluation
// metrics through observe_metric() and carries state for checkpoints.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/schema.h"

namespace hftrain {

struct ScheduleContext {
  double base_lr = 0;         // training.learning_rate
  int64_t warmup_steps = 0;   // warmup_steps_for(...)
  int64_t total_steps = 0;    // max_steps of the run
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;
  // True when lr() is a function of the optimizer step (the trainer steps it after each optimizer
  // step); false for metric-driven schedules (reduce_lr_on_plateau), which HF steps after evaluation.
  virtual bool steps_per_optimizer_step() const { return true; }
  // Called by the trainer after each evaluation with the value of metric_for_best_model.
  virtual void observe_metric(double /*value*/) {}
  // State beyond the step counter, for checkpoints (empty object for pure functions of the step).
  virtual nlohmann::json state() const { return nlohmann::json::object(); }
  virtual void load_state(const nlohmann::json& /*state*/) {}
};

// Base of HF's LambdaLR schedules: lr(step) = base_lr * factor(step), as torch's LambdaLR computes it.
class LambdaSchedule : public Schedule {
 public:
  explicit LambdaSchedule(const ScheduleContext& context) : c_(context) {}
  double lr(int64_t step) const override { return c_.base_lr * factor(step); }
  virtual double factor(int64_t step) const = 0;

 protected:
  // HF's shared warmup: step / max(1, W).
  double warmup_factor(int64_t step) const;
  ScheduleContext c_;
};

// Number of warmup steps as HF's TrainingArguments.get_warmup_steps computes it: warmup_steps when >= 1;
// ceil(total_steps * warmup_steps) when it is a ratio below 1 (transformers v5); else (0, transformers v4)
// ceil(total_steps * warmup_ratio).
int64_t warmup_steps_for(double warmup_steps, double warmup_ratio, int64_t total_steps);

}  // namespace hftrain
