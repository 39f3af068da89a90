// DeepSpeed WarmupLR / WarmupDecayLR (see deepspeed_schedules.h).
#include "optim/deepspeed_schedules.h"

#include <algorithm>
#include <cmath>

namespace hftrain {
namespace {

template <class O>
void declare_warmup(Schema<O>& s) {
  s.add("warmup_min_lr", &O::warmup_min_lr, "Learning rate at the start of warmup.").min(0);
  s.add("warmup_max_lr", &O::warmup_max_lr, "Learning rate at the end of warmup; null = training.learning_rate.")
      .check([](const std::optional<double>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + format_number(*v) : "";
      });
  s.add("warmup_num_steps", &O::warmup_num_steps, "Warmup steps (at least 2 are used); null = the run's warmup steps.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + std::to_string(*v) : "";
      });
  s.add("warmup_type", &O::warmup_type, "Warmup curve: log or linear.").choices({"log", "linear"});
}

DeepSpeedWarmupLR::Options warmup_part(const DeepSpeedWarmupDecayLR::Options& o) {
  return {o.warmup_min_lr, o.warmup_max_lr, o.warmup_num_steps, o.warmup_type};
}

}  // namespace

void DeepSpeedWarmupLR::Options::declare(Schema<Options>& s) { declare_warmup(s); }

DeepSpeedWarmupLR::DeepSpeedWarmupLR(const Options& o, const ScheduleContext& c)
    : min_lr_(o.warmup_min_lr),
      max_lr_(o.warmup_max_lr.value_or(c.base_lr)),
      warmup_num_steps_(std::max<int64_t>(2, o.warmup_num_steps.value_or(c.warmup_steps))),
      log_warmup_(o.warmup_type == "log") {}

double DeepSpeedWarmupLR::warmup_gamma(int64_t it) const {
  if (log_warmup_) return 1.0 / std::log(static_cast<double>(warmup_num_steps_)) * std::log(static_cast<double>(it + 1));
  return static_cast<double>(it) / static_cast<double>(warmup_num_steps_);
}

double DeepSpeedWarmupLR::gamma(int64_t it) const { return it < warmup_num_steps_ ? warmup_gamma(it) : 1.0; }

double DeepSpeedWarmupLR::lr(int64_t step) const {
  const int64_t it = std::max<int64_t>(0, step - 1);
  return min_lr_ + (max_lr_ - min_lr_) * gamma(it);
}

void DeepSpeedWarmupDecayLR::Options::declare(Schema<Options>& s) {
  declare_warmup(s);
  s.add("total_num_steps", &Options::total_num_steps, "Step at which the decay reaches 0; null = the run's total steps.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + std::to_string(*v) : "";
      });
}

DeepSpeedWarmupDecayLR::DeepSpeedWarmupDecayLR(const Options& o, const ScheduleContext& c)
    : DeepSpeedWarmupLR(warmup_part(o), c), total_num_steps_(o.total_num_steps.value_or(c.total_steps)) {}

double DeepSpeedWarmupDecayLR::gamma(int64_t it) const {
  if (it < warmup_num_steps_) return warmup_gamma(it);
  return std::max(0.0, static_cast<double>(total_num_steps_ - it) /
                           std::max(1.0, static_cast<double>(total_num_steps_ - warmup_num_steps_)));
}

}  // namespace hftrain
