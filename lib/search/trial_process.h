// One search trial as a child `hftrain train` process: its own process group (so a crash or a stop cannot
// take the search down, and the search can stop the whole trial), stdout and stderr appended to a log file,
// and a pipe (HFTRAIN_TRIAL_REPORT_FD, train/trial_report.h) on which it reports each evaluation.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hftrain {

struct TrialEnd {
  int exit_code = 0;       // the child's exit status, or 128 + the signal that ended it
  bool pruned = false;     // stopped (SIGTERM) because `on_evaluation` asked for it
  int stop_signal = 0;     // SIGINT / SIGTERM that hftrain search received while the trial ran (it was stopped)
  std::vector<nlohmann::json> evaluations;  // {"step", "epoch", "metrics"} as the trial reported them
  // When pruned: the evaluation whose report got the verdict. The trial runs on while the verdict is asked
  // for, so `evaluations` may hold later ones that were never reported to the study.
  nlohmann::json pruning_evaluation;
};

// Runs `argv` (argv[0] an executable path) with its output appended to `log_path`. `on_evaluation` is called
// for each evaluation the trial reports; returning true stops the trial with SIGTERM (it finishes its step
// and exits 143) and marks it pruned. A stop signal received by this process (util/signals.h, under a
// StopSignalGuard) stops the trial the same way. Returns once the trial has exited.
TrialEnd run_trial_process(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::function<bool(const nlohmann::json&)>& on_evaluation);

// The lines of a trial's log that say why it failed: its `error:` lines, else its last `tail_lines` lines.
std::string trial_failure_text(const std::string& log_path, std::size_t tail_lines = 5);

}  // namespace hftrain
