// Learning-rate schedules as pure functions of the optimizer step: lr(step) = base_lr * factor(step).
#pragma once

#include "config/schema.h"

namespace hftrain {

struct ScheduleContext {
  double base_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;
};

// `linear`: linear warmup from 0 to base_lr over warmup_steps, then linear decay to 0 at total_steps.
class LinearSchedule : public Schedule {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  LinearSchedule(const Options&, const ScheduleContext& context) : c_(context) {}
  double lr(int64_t step) const override;

 private:
  ScheduleContext c_;
};

// Number of warmup steps as HF's TrainingArguments.get_warmup_steps computes it.
int64_t warmup_steps_for(int64_t warmup_steps, double warmup_ratio, int64_t total_steps);

}  // namespace hftrain
