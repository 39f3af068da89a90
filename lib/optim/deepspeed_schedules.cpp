// DeepSpeed WarmupLR / WarmupDecayLR / WarmupCosineLR (see deepspeed_schedules.h).
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

void DeepSpeedWarmupCosineLR::Options::declare(Schema<Options>& s) {
  s.add("total_num_steps", &Options::total_num_steps, "Step at which the cosine reaches cos_min_ratio; null = the run's total steps.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + std::to_string(*v) : "";
      });
  s.add("warmup_min_ratio", &Options::warmup_min_ratio, "Start of the warmup, as a fraction of training.learning_rate.").min(0).max(1);
  s.add("warmup_num_steps", &Options::warmup_num_steps, "Warmup steps (at least 2 are used); null = the run's warmup steps.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + std::to_string(*v) : "";
      });
  s.add("cos_min_ratio", &Options::cos_min_ratio, "End of the cosine, as a fraction of training.learning_rate.").min(0).max(1);
  s.add("warmup_type", &Options::warmup_type, "Warmup curve: log or linear.").choices({"log", "linear"});
}

DeepSpeedWarmupCosineLR::DeepSpeedWarmupCosineLR(const Options& o, const ScheduleContext& c)
    : options_(o),
      base_lr_(c.base_lr),
      warmup_num_steps_(std::max<int64_t>(2, o.warmup_num_steps.value_or(c.warmup_steps))),
      total_num_steps_(o.total_num_steps.value_or(c.total_steps)) {}

double DeepSpeedWarmupCosineLR::ratio(int64_t it) const {
  const double w = static_cast<double>(warmup_num_steps_);
  if (it < warmup_num_steps_) {
    const double r = options_.warmup_type == "log" ? std::log(static_cast<double>(it + 1)) / std::log(w)
                                                   : static_cast<double>(it) / w;
    return options_.warmup_min_ratio + r * (1.0 - options_.warmup_min_ratio);
  }
  const double real_last_step = static_cast<double>(it - warmup_num_steps_ + 1);
  const double real_total_steps = std::max<double>(1.0, static_cast<double>(total_num_steps_ - warmup_num_steps_));
  const double cosine = (1.0 + std::cos(M_PI * real_last_step / real_total_steps)) / 2.0;
  return std::max(0.0, options_.cos_min_ratio + (1.0 - options_.cos_min_ratio) * cosine);
}

double DeepSpeedWarmupCosineLR::lr(int64_t step) const { return step == 0 ? 0.0 : base_lr_ * ratio(step - 1); }

double DeepSpeedWarmupDecayLR::gamma(int64_t it) const {
  if (it < warmup_num_steps_) return warmup_gamma(it);
  return std::max(0.0, static_cast<double>(total_num_steps_ - it) /
                           std::max(1.0, static_cast<double>(total_num_steps_ - warmup_num_steps_)));
}

}  // namespace hftrain
