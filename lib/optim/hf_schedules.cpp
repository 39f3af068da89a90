// HF LambdaLR schedules (see hf_schedules.h). Each factor mirrors the lambda of the same name in
// transformers' optimization.py, including its order of floating-point operations.
#include "optim/hf_schedules.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace hftrain {
namespace {

constexpr double kPi = 3.141592653589793;  // math.pi

double as_double(int64_t v) { return static_cast<double>(v); }

// (s - W) / max(1, T - W)
double progress(int64_t s, int64_t W, int64_t T) { return as_double(s - W) / as_double(std::max<int64_t>(1, T - W)); }

// 0.5 * (1 + cos(pi * num_cycles * 2 * p))
double half_cosine(double num_cycles, double p) { return 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * p)); }

const std::vector<std::string> kWsdShapes = {"linear", "cosine", "1-sqrt"};

}  // namespace

double LinearSchedule::factor(int64_t s) const {
  const int64_t W = c_.warmup_steps, T = c_.total_steps;
  if (s < W) return warmup_factor(s);
  return std::max(0.0, as_double(T - s) / as_double(std::max<int64_t>(1, T - W)));
}

void CosineSchedule::Options::declare(Schema<Options>& s) {
  s.add("num_cycles", &Options::num_cycles, "Number of cosine waves after warmup (0.5 = decay to 0 once).").min(0);
}

double CosineSchedule::factor(int64_t s) const {
  if (s < c_.warmup_steps) return warmup_factor(s);
  return std::max(0.0, half_cosine(o_.num_cycles, progress(s, c_.warmup_steps, c_.total_steps)));
}

void CosineWithRestartsSchedule::Options::declare(Schema<Options>& s) {
  s.add("num_cycles", &Options::num_cycles, "Number of hard restarts (cosine decays from 1 to 0 each cycle).").min(0);
}

double CosineWithRestartsSchedule::factor(int64_t s) const {
  if (s < c_.warmup_steps) return warmup_factor(s);
  const double p = progress(s, c_.warmup_steps, c_.total_steps);
  if (p >= 1.0) return 0.0;
  return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * std::fmod(o_.num_cycles * p, 1.0))));
}

void PolynomialSchedule::Options::declare(Schema<Options>& s) {
  s.add("lr_end", &Options::lr_end, "Final learning rate (must be below training.learning_rate).").min(0);
  s.add("power", &Options::power, "Power of the polynomial decay.").min(0);
}

PolynomialSchedule::PolynomialSchedule(const Options& options, const ScheduleContext& context)
    : LambdaSchedule(context), o_(options) {
  if (!(c_.base_lr > o_.lr_end))
    throw ConfigError("scheduler.lr_end: lr_end (" + format_number(o_.lr_end) +
                      ") must be smaller than training.learning_rate (" + format_number(c_.base_lr) + ")");
  if (c_.total_steps == c_.warmup_steps)
    throw ConfigError("scheduler: polynomial decay needs more total steps (" + std::to_string(c_.total_steps) +
                      ") than warmup steps (" + std::to_string(c_.warmup_steps) + ")");
}

double PolynomialSchedule::factor(int64_t s) const {
  const int64_t W = c_.warmup_steps, T = c_.total_steps;
  const double lr_init = c_.base_lr;
  if (s < W) return warmup_factor(s);
  if (s > T) return o_.lr_end / lr_init;
  const double lr_range = lr_init - o_.lr_end;
  const double pct_remaining = 1 - as_double(s - W) / as_double(T - W);
  const double decay = lr_range * std::pow(pct_remaining, o_.power) + o_.lr_end;
  return decay / lr_init;
}

double ConstantWithWarmupSchedule::factor(int64_t s) const {
  if (s < c_.warmup_steps) return as_double(s) / std::max(1.0, as_double(c_.warmup_steps));
  return 1.0;
}

void InverseSqrtSchedule::Options::declare(Schema<Options>& s) {
  s.add("timescale", &Options::timescale, "Decay time scale in steps; null = warmup steps, or 10000 without warmup.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 1 ? "must be >= 1, got " + std::to_string(*v) : "";
      });
}

InverseSqrtSchedule::InverseSqrtSchedule(const Options& options, const ScheduleContext& context)
    : LambdaSchedule(context),
      timescale_(options.timescale ? *options.timescale : (context.warmup_steps != 0 ? context.warmup_steps : 10000)) {}

double InverseSqrtSchedule::factor(int64_t s) const {
  const int64_t W = c_.warmup_steps;
  if (s < W) return warmup_factor(s);
  const int64_t shift = timescale_ - W;
  return 1.0 / std::sqrt(as_double(s + shift) / as_double(timescale_));
}

void CosineWithMinLrSchedule::Options::declare(Schema<Options>& s) {
  s.add("num_cycles", &Options::num_cycles, "Number of cosine waves after warmup.").min(0);
  s.add("min_lr", &Options::min_lr, "Floor of the learning rate (set this or min_lr_rate).");
  s.add("min_lr_rate", &Options::min_lr_rate, "Floor as a fraction of training.learning_rate (set this or min_lr).");
}

CosineWithMinLrSchedule::CosineWithMinLrSchedule(const Options& options, const ScheduleContext& context)
    : LambdaSchedule(context), num_cycles_(options.num_cycles) {
  if (options.min_lr && options.min_lr_rate)
    throw ConfigError("scheduler.min_lr_rate: set only one of min_lr and min_lr_rate (both are set)");
  if (!options.min_lr && !options.min_lr_rate)
    throw ConfigError("scheduler.min_lr: cosine_with_min_lr needs one of min_lr or min_lr_rate");
  if (options.min_lr) {
    if (context.base_lr == 0)
      throw ConfigError("scheduler.min_lr: cannot be turned into a rate when training.learning_rate is 0; use min_lr_rate");
    min_lr_rate_ = *options.min_lr / context.base_lr;
  } else {
    min_lr_rate_ = *options.min_lr_rate;
  }
}

double CosineWithMinLrSchedule::factor(int64_t s) const {
  if (s < c_.warmup_steps) return warmup_factor(s);
  double f = half_cosine(num_cycles_, progress(s, c_.warmup_steps, c_.total_steps));
  f = f * (1 - min_lr_rate_) + min_lr_rate_;
  return std::max(0.0, f);
}

void WarmupStableDecaySchedule::Options::declare(Schema<Options>& s) {
  s.add("num_decay_steps", &Options::num_decay_steps, "Steps of the final decay phase.").min(0).required();
  s.add("num_stable_steps", &Options::num_stable_steps,
        "Steps at the peak learning rate; null = total - warmup - decay steps.")
      .check([](const std::optional<int64_t>& v) -> std::string {
        return v && *v < 0 ? "must be >= 0, got " + std::to_string(*v) : "";
      });
  s.add("warmup_type", &Options::warmup_type, "Shape of the warmup.").choices(kWsdShapes);
  s.add("decay_type", &Options::decay_type, "Shape of the decay.").choices(kWsdShapes);
  s.add("min_lr_ratio", &Options::min_lr_ratio, "Start of the warmup and end of the decay, as a fraction of the peak.")
      .min(0)
      .max(1);
  s.add("num_cycles", &Options::num_cycles, "Cosine waves of a cosine decay.").min(0);
}

WarmupStableDecaySchedule::WarmupStableDecaySchedule(const Options& options, const ScheduleContext& context)
    : LambdaSchedule(context),
      o_(options),
      stable_steps_(options.num_stable_steps ? *options.num_stable_steps
                                             : context.total_steps - context.warmup_steps - options.num_decay_steps) {}

double WarmupStableDecaySchedule::factor(int64_t s) const {
  const int64_t W = c_.warmup_steps, S = stable_steps_, D = o_.num_decay_steps;
  const double m = o_.min_lr_ratio;
  if (s < W) {
    const double p = as_double(s) / as_double(std::max<int64_t>(1, W));
    double f = p;  // linear
    if (o_.warmup_type == "cosine") f = 0.5 * (1.0 - std::cos(kPi * p));
    if (o_.warmup_type == "1-sqrt") f = 1.0 - std::sqrt(1.0 - p);
    return std::max(0.0, f * (1.0 - m) + m);
  }
  if (s < W + S) return 1.0;
  if (s < W + S + D) {
    const double p = as_double(s - W - S) / as_double(std::max<int64_t>(1, D));
    double f = 1.0 - p;  // linear
    if (o_.decay_type == "cosine") f = half_cosine(o_.num_cycles, p);
    if (o_.decay_type == "1-sqrt") f = 1.0 - std::sqrt(p);
    return std::max(0.0, f * (1.0 - m) + m);
  }
  return m;
}

}  // namespace hftrain
