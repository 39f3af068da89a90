// The value a search trial reports to Optuna from its evaluation metrics: the metric named by --metric, or
// HF's default_compute_objective (eval_loss when the metrics hold only the loss, else the sum of the other
// metrics; epoch, speed metrics (_runtime, _per_second, _compilation_time) and memory metrics left out).
// eval_perplexity is left out too: it is exp(eval_loss), which HF's run_clm adds after evaluate() rather than
// in compute_metrics, so a language model's default objective is its loss, as in HF.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hftrain {

// `metric` as a key of the evaluation metrics: "" stays "" (HF's default objective); a name without the
// "eval_" prefix gets it ("loss" -> "eval_loss"), as HF's metric_for_best_model.
std::string objective_metric_key(const std::string& metric);

// The objective of `metrics` (one evaluation's, eval_-prefixed). `metric_key` "" = HF's default. A named
// metric that is absent, or a value that is not a finite number, is a RuntimeFailure naming it and the keys
// the evaluation had.
double trial_objective(const nlohmann::json& metrics, const std::string& metric_key);

}  // namespace hftrain
