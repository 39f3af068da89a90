// Callback handler, DefaultFlowCallback and EarlyStoppingCallback (see callbacks.h).
#include "train/callbacks.h"

#include <cmath>

#include "distributed/comm.h"
#include "log/logger.h"
#include "runspec/sections.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {

nlohmann::json CallbackHandler::export_states() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& c : callbacks_) {
    nlohmann::json s = c->export_state();
    if (!s.is_null()) out[c->name()] = s;
  }
  return out;
}

void CallbackHandler::import_states(const nlohmann::json& states) {
  for (auto& c : callbacks_)
    if (states.contains(c->name())) c->import_state(states.at(c->name()));
}

void DefaultFlowCallback::on_step_end(const TrainerState& s, TrainerControl& c) {
  FlowDecision d = flow_.on_step_end(s.global_step);
  c.should_log = c.should_log || d.should_log;
  c.should_evaluate = c.should_evaluate || d.should_evaluate;
  c.should_save = c.should_save || d.should_save;
  c.should_training_stop = c.should_training_stop || d.should_training_stop;
}

void DefaultFlowCallback::on_epoch_end(const TrainerState& s, TrainerControl& c) {
  FlowDecision d = flow_.on_epoch_end(s.epoch);
  c.should_log = c.should_log || d.should_log;
  c.should_evaluate = c.should_evaluate || d.should_evaluate;
  c.should_save = c.should_save || d.should_save;
}

void EarlyStoppingCallback::Options::declare(Schema<Options>& s) {
  s.add("early_stopping_patience", &Options::early_stopping_patience,
        "Evaluations without improvement before training stops.").min(1);
  s.add("early_stopping_threshold", &Options::early_stopping_threshold,
        "Minimum improvement of metric_for_best_model that resets the patience.").min(0);
}

EarlyStoppingCallback::EarlyStoppingCallback(const Options& options, const std::string& metric, bool greater_is_better)
    : options_(options), metric_(metric), greater_is_better_(greater_is_better) {}

void EarlyStoppingCallback::on_evaluate(const TrainerState& s, TrainerControl& c, const nlohmann::json& metrics) {
  if (!metrics.contains(metric_))
    throw ConfigError("early stopping: metric_for_best_model '" + metric_ + "' is not among the evaluation metrics");
  const double value = metrics.at(metric_).get<double>();
  bool improved = s.best_metric.is_null();
  if (!improved) {
    const double best = s.best_metric.get<double>();
    const bool better = greater_is_better_ ? value > best : value < best;
    improved = better && std::abs(value - best) > options_.early_stopping_threshold;
  }
  patience_counter_ = improved ? 0 : patience_counter_ + 1;
  if (patience_counter_ >= options_.early_stopping_patience && !c.should_training_stop) {
    c.should_training_stop = true;
    if (is_main_rank())
      log_info("early stopping at step " + std::to_string(s.global_step) + ": " + metric_ + " has not improved on " +
               s.best_metric.dump() + " (by more than early_stopping_threshold " +
               format_number(options_.early_stopping_threshold) + ") for " + std::to_string(patience_counter_) +
               " evaluations (early_stopping_patience)");
  }
}

nlohmann::json EarlyStoppingCallback::export_state() const {
  return {{"args",
           {{"early_stopping_patience", options_.early_stopping_patience},
            {"early_stopping_threshold", options_.early_stopping_threshold}}},
          {"attributes", {{"early_stopping_patience_counter", patience_counter_}}}};
}

void EarlyStoppingCallback::import_state(const nlohmann::json& state) {
  patience_counter_ = state.at("attributes").at("early_stopping_patience_counter").get<int64_t>();
}

CallbackContext best_metric_context(const TrainingArgs& args) {
  CallbackContext c;
  std::string metric = args.metric_for_best_model.empty() ? "loss" : args.metric_for_best_model;
  c.greater_is_better = args.greater_is_better.has_value() ? *args.greater_is_better : !ends_with(metric, "loss");
  c.metric_for_best_model = metric.rfind("eval_", 0) == 0 ? metric : "eval_" + metric;
  c.output_dir = args.output_dir;
  return c;
}

}  // namespace hftrain
