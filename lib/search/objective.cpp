// A trial's objective from its evaluation metrics (see objective.h).
#include "search/objective.h"

#include <cmath>

#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace {

std::string key_list(const nlohmann::json& metrics) {
  std::string list;
  for (const auto& kv : metrics.items()) list += (list.empty() ? "" : ", ") + kv.key();
  return list.empty() ? "none" : list;
}

}  // namespace

std::string objective_metric_key(const std::string& metric) {
  if (metric.empty() || metric.rfind("eval_", 0) == 0) return metric;
  return "eval_" + metric;
}

double trial_objective(const nlohmann::json& metrics, const std::string& metric_key) {
  if (!metric_key.empty()) {
    if (!metrics.contains(metric_key) || !metrics[metric_key].is_number())
      throw RuntimeFailure("search: the trial's evaluation has no number '" + metric_key + "' (--metric); it has " +
                           key_list(metrics));
    const double v = metrics[metric_key].get<double>();
    if (!std::isfinite(v)) throw RuntimeFailure("search: the trial's " + metric_key + " is " + std::to_string(v));
    return v;
  }
  double sum = 0;
  int terms = 0;
  for (const auto& kv : metrics.items()) {
    const std::string& k = kv.key();
    if (k == "eval_loss" || k == "eval_perplexity" || k == "epoch" || ends_with(k, "_runtime") || ends_with(k, "_per_second") ||
        ends_with(k, "_compilation_time") || k.find("_mem_") != std::string::npos || !kv.value().is_number())
      continue;
    sum += kv.value().get<double>();
    ++terms;
  }
  if (terms == 0) {
    if (!metrics.contains("eval_loss") || !metrics["eval_loss"].is_number())
      throw RuntimeFailure("search: the trial's evaluation has neither eval_loss nor another metric; it has " + key_list(metrics));
    sum = metrics["eval_loss"].get<double>();
  }
  if (!std::isfinite(sum)) throw RuntimeFailure("search: the trial's objective (HF's default: " + key_list(metrics) + ") is not finite");
  return sum;
}

}  // namespace hftrain
