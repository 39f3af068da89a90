// The data of `hftrain report`: which curves to draw from each run's trainer_state.json log_history
// (training loss, eval metrics, learning rate, gradient norm, each against the global step) and the
// axis arithmetic ("nice" tick spacing of 1, 2 or 5 x 10^k, as in Heckbert's Graphics Gems labels).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace hftrain {

struct RunHistory {
  std::string label;   // shown in legends
  std::string source;  // the directory it was read from
  nlohmann::json state;  // the whole trainer_state.json
  std::string best_metric_name;  // the metric best_metric measures ("eval_accuracy"); "" when not known
};

struct Series {
  std::size_t run = 0;  // index into the runs
  std::vector<std::pair<double, double>> points;  // (step, value), in log order
};

struct Plot {
  std::string key;    // log key: "loss", "eval_loss", "learning_rate", ...
  std::string title;
  std::vector<Series> series;  // runs without a finite value for `key` have no series
};

// Plots in reading order: training loss, eval loss, other eval metrics (alphabetical), learning rate,
// gradient norm. Eval speed figures (runtime, *_per_second) are not plotted.
std::vector<Plot> collect_plots(const std::vector<RunHistory>& runs);

struct Axis {
  double min = 0, max = 1;
  std::vector<double> ticks;
  bool log = false;  // positions go by log10 of the value
};

// An axis covering [lo, hi] with about `target_ticks` ticks at a 1/2/5 x 10^k spacing.
Axis nice_axis(double lo, double hi, int target_ticks = 5);

// A log10 axis over whole decades covering [lo, hi] (0 < lo <= hi): ticks at 1, 2 and 5 x 10^k over up
// to 3 decades, at the powers of ten beyond.
Axis log_axis(double lo, double hi);

// The value axis of a plot: logarithmic for a loss (a key ending in "loss") whose positive values span a
// factor of 10 or more -- a loss falling over orders of magnitude is read on a log scale, as in
// TensorBoard's log toggle -- else nice_axis.
Axis value_axis(const std::string& key, double lo, double hi);

}  // namespace hftrain
