// Learning-rate schedules (see schedule.h); formulas follow transformers' optimization.py.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace hftrain {

int64_t warmup_steps_for(int64_t warmup_steps, double warmup_ratio, int64_t total_steps) {
  return warmup_steps > 0 ? warmup_steps : static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

double LinearSchedule::lr(int64_t s) const {
  const double W = static_cast<double>(c_.warmup_steps), T = static_cast<double>(c_.total_steps);
  const double step = static_cast<double>(s);
  double factor;
  if (step < W) {
    factor = step / std::max(1.0, W);
  } else {
    factor = std::max(0.0, (T - step) / std::max(1.0, T - W));
  }
  return c_.base_lr * factor;
}

}  // namespace hftrain
