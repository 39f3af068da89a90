// ReduceLROnPlateau (see plateau.h); step() and is_better() follow torch 1.13's lr_scheduler.py.
#include "optim/plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace hftrain {

void ReduceLrOnPlateauSchedule::Options::declare(Schema<Options>& s) {
  s.add("mode", &Options::mode, "min: lower metric is better; max: higher is better.").choices({"min", "max"});
  s.add("factor", &Options::factor, "Multiplier applied to the learning rate on a plateau (< 1).")
      .greater_than(0)
      .check([](const double& v) -> std::string { return v >= 1.0 ? "must be < 1, got " + format_number(v) : ""; });
  s.add("patience", &Options::patience, "Evaluations without improvement tolerated before reducing.").min(0);
  s.add("threshold", &Options::threshold, "Minimum change that counts as an improvement.").min(0);
  s.add("threshold_mode", &Options::threshold_mode, "rel: best*(1 -/+ threshold); abs: best -/+ threshold.")
      .choices({"rel", "abs"});
  s.add("cooldown", &Options::cooldown, "Evaluations to wait after a reduction before counting again.").min(0);
  s.add("min_lr", &Options::min_lr, "Lower bound of the learning rate.").min(0);
  s.add("eps", &Options::eps, "Reductions smaller than this are skipped.").min(0);
}

ReduceLrOnPlateauSchedule::ReduceLrOnPlateauSchedule(const Options& options, const ScheduleContext& context)
    : o_(options),
      lr_(context.base_lr),
      best_(options.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity()) {}

bool ReduceLrOnPlateauSchedule::is_better(double a) const {
  if (o_.mode == "min" && o_.threshold_mode == "rel") return a < best_ * (1. - o_.threshold);
  if (o_.mode == "min") return a < best_ - o_.threshold;
  if (o_.threshold_mode == "rel") return a > best_ * (o_.threshold + 1.);
  return a > best_ + o_.threshold;
}

void ReduceLrOnPlateauSchedule::observe_metric(double current) {
  last_epoch_ += 1;
  if (is_better(current)) {
    best_ = current;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (cooldown_counter_ > 0) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad evaluations during cooldown do not count
  }
  if (num_bad_epochs_ > o_.patience) {
    const double new_lr = std::max(lr_ * o_.factor, o_.min_lr);
    if (lr_ - new_lr > o_.eps) lr_ = new_lr;
    cooldown_counter_ = o_.cooldown;
    num_bad_epochs_ = 0;
  }
}

nlohmann::json ReduceLrOnPlateauSchedule::state() const {
  // JSON has no infinities: an unset best (still mode_worse) is written as null.
  return {{"lr", lr_},
          {"best", std::isfinite(best_) ? nlohmann::json(best_) : nlohmann::json(nullptr)},
          {"num_bad_epochs", num_bad_epochs_},
          {"cooldown_counter", cooldown_counter_},
          {"last_epoch", last_epoch_}};
}

void ReduceLrOnPlateauSchedule::load_state(const nlohmann::json& state) {
  try {
    lr_ = state.at("lr").get<double>();
    const auto& best = state.at("best");
    best_ = best.is_null() ? (o_.mode == "min" ? std::numeric_limits<double>::infinity()
                                               : -std::numeric_limits<double>::infinity())
                           : best.get<double>();
    num_bad_epochs_ = state.at("num_bad_epochs").get<int64_t>();
    cooldown_counter_ = state.at("cooldown_counter").get<int64_t>();
    last_epoch_ = state.at("last_epoch").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(std::string("reduce_lr_on_plateau scheduler state is malformed: ") + e.what());
  }
}

}  // namespace hftrain
