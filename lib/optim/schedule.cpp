// Shared schedule helpers (see schedule.h).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace hftrain {

int64_t warmup_steps_for(double warmup_steps, double warmup_ratio, int64_t total_steps) {
  if (warmup_steps >= 1) return static_cast<int64_t>(warmup_steps);
  const double ratio = warmup_steps > 0 ? warmup_steps : warmup_ratio;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
}

double LambdaSchedule::warmup_factor(int64_t step) const {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, c_.warmup_steps));
}

}  // namespace hftrain
