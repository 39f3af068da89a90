// The evaluation report of a search trial: when `hftrain search` starts `hftrain train` as a trial it sets
// HFTRAIN_TRIAL_REPORT_FD to a pipe, and the trial writes one JSON line per evaluation to it
// ({"step": global_step, "epoch": ..., "metrics": {...}}), which the search reports to Optuna's pruner.
#pragma once

#include <memory>

#include "train/callbacks.h"

namespace hftrain {

inline constexpr const char* kTrialReportFdVariable = "HFTRAIN_TRIAL_REPORT_FD";

class TrialReportCallback : public TrainerCallback {
 public:
  explicit TrialReportCallback(int fd) : fd_(fd) {}
  std::string name() const override { return "TrialReportCallback"; }
  void on_evaluate(const TrainerState& s, TrainerControl& c, const nlohmann::json& metrics) override;

 private:
  int fd_;
};

// The callback when HFTRAIN_TRIAL_REPORT_FD names an open descriptor, else null (not a trial). A value that
// is not an open descriptor is a ConfigError naming the variable.
std::unique_ptr<TrainerCallback> trial_report_from_environment();

}  // namespace hftrain
