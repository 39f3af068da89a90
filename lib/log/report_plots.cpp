// Report data (see report_plots.h).
#include "log/report_plots.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "util/strings.h"

namespace hftrain {
namespace {

bool is_speed_key(const std::string& k) { return ends_with(k, "_runtime") || ends_with(k, "_per_second"); }

std::string title_of(const std::string& key) {
  if (key == "loss") return "Training loss";
  if (key == "learning_rate") return "Learning rate";
  if (key == "grad_norm") return "Gradient norm";
  if (key == "eval_loss") return "Evaluation loss";
  return "Evaluation " + key.substr(5);
}

// Heckbert's nice number: 1, 2, 5 or 10 times a power of ten, rounded or not.
double nice_number(double x, bool round) {
  const double exponent = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, exponent);
  double nf;
  if (round) nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return nf * std::pow(10.0, exponent);
}

}  // namespace

std::vector<Plot> collect_plots(const std::vector<RunHistory>& runs) {
  std::vector<std::string> keys = {"loss"};
  std::set<std::string> eval_keys;
  for (const auto& run : runs) {
    if (!run.state.contains("log_history") || !run.state["log_history"].is_array()) continue;
    for (const auto& entry : run.state["log_history"])
      for (const auto& item : entry.items())
        if (item.key().rfind("eval_", 0) == 0 && item.value().is_number() && !is_speed_key(item.key()))
          eval_keys.insert(item.key());
  }
  if (eval_keys.count("eval_loss")) keys.push_back("eval_loss");
  for (const auto& k : eval_keys)
    if (k != "eval_loss") keys.push_back(k);
  keys.push_back("learning_rate");
  keys.push_back("grad_norm");

  std::vector<Plot> plots;
  for (const auto& key : keys) {
    Plot plot{key, title_of(key), {}};
    for (std::size_t r = 0; r < runs.size(); ++r) {
      Series series{r, {}};
      const auto& history = runs[r].state.value("log_history", nlohmann::json::array());
      for (const auto& entry : history) {
        if (!entry.is_object() || !entry.contains(key) || !entry.contains("step")) continue;
        const auto& v = entry[key];
        const auto& step = entry["step"];
        if (!v.is_number() || !step.is_number()) continue;
        const double y = v.get<double>(), x = step.get<double>();
        if (std::isfinite(x) && std::isfinite(y)) series.points.emplace_back(x, y);
      }
      if (!series.points.empty()) plot.series.push_back(std::move(series));
    }
    if (!plot.series.empty()) plots.push_back(std::move(plot));
  }
  return plots;
}

Axis log_axis(double lo, double hi) {
  Axis a;
  a.log = true;
  const int first = static_cast<int>(std::floor(std::log10(lo) + 1e-12));
  const int last = std::max(first + 1, static_cast<int>(std::ceil(std::log10(hi) - 1e-12)));
  a.min = std::pow(10.0, first);
  a.max = std::pow(10.0, last);
  const bool fine = last - first <= 3;
  for (int k = first; k <= last; ++k)
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && (!fine || k == last)) continue;
      a.ticks.push_back(m * std::pow(10.0, k));
    }
  return a;
}

Axis value_axis(const std::string& key, double lo, double hi) {
  const bool loss = ends_with(key, "loss");
  if (loss && lo > 0 && hi >= 10 * lo) return log_axis(lo, hi);
  return nice_axis(lo, hi, 5);
}

Axis nice_axis(double lo, double hi, int target_ticks) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double range = nice_number(hi - lo, false);
  const double d = nice_number(range / std::max(1, target_ticks - 1), true);
  Axis a;
  a.min = std::floor(lo / d) * d;
  a.max = std::ceil(hi / d) * d;
  const auto n = static_cast<int>(std::llround((a.max - a.min) / d));
  for (int i = 0; i <= n; ++i) {
    const double t = a.min + i * d;
    a.ticks.push_back(std::fabs(t) < 1e-9 * d ? 0.0 : t);
  }
  return a;
}

}  // namespace hftrain
