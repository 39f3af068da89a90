// Trainer callbacks with HF's event set over TrainerState / TrainerControl, the handler that fires
// them (resetting control flags as HF's CallbackHandler does), HF's DefaultFlowCallback and the
// EarlyStoppingCallback. Callbacks chosen in the spec's `callbacks:` list come from a registry.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/schema.h"
#include "train/flow_control.h"
#include "train/trainer_state.h"

namespace hftrain {

struct TrainingArgs;

struct TrainerControl {
  bool should_training_stop = false;
  bool should_epoch_stop = false;
  bool should_save = false;
  bool should_evaluate = false;
  bool should_log = false;
};

class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual std::string name() const = 0;
  virtual void on_init_end(const TrainerState&, TrainerControl&) {}
  virtual void on_train_begin(const TrainerState&, TrainerControl&) {}
  virtual void on_train_end(const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainerState&, TrainerControl&) {}
  virtual void on_step_begin(const TrainerState&, TrainerControl&) {}
  virtual void on_pre_optimizer_step(const TrainerState&, TrainerControl&) {}
  virtual void on_optimizer_step(const TrainerState&, TrainerControl&) {}
  virtual void on_substep_end(const TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainerState&, TrainerControl&) {}
  virtual void on_evaluate(const TrainerState&, TrainerControl&, const nlohmann::json& /*metrics*/) {}
  virtual void on_predict(const TrainerState&, TrainerControl&, const nlohmann::json& /*metrics*/) {}
  virtual void on_save(const TrainerState&, TrainerControl&) {}
  virtual void on_log(const TrainerState&, TrainerControl&, const nlohmann::json& /*logs*/) {}
  virtual void on_prediction_step(const TrainerState&, TrainerControl&) {}
  // Saved into trainer_state.json "stateful_callbacks" ({"args": ..., "attributes": ...}); null = stateless.
  virtual nlohmann::json export_state() const { return nullptr; }
  virtual void import_state(const nlohmann::json&) {}
};

// Fires events on every callback in order; resets control flags where HF's CallbackHandler does.
class CallbackHandler {
 public:
  void add(std::unique_ptr<TrainerCallback> callback) { callbacks_.push_back(std::move(callback)); }
  const std::vector<std::unique_ptr<TrainerCallback>>& callbacks() const { return callbacks_; }
  TrainerControl& control() { return control_; }

  void on_init_end(const TrainerState& s) { fire(&TrainerCallback::on_init_end, s); }
  void on_train_begin(const TrainerState& s) { control_.should_training_stop = false; fire(&TrainerCallback::on_train_begin, s); }
  void on_train_end(const TrainerState& s) { fire(&TrainerCallback::on_train_end, s); }
  void on_epoch_begin(const TrainerState& s) { control_.should_epoch_stop = false; fire(&TrainerCallback::on_epoch_begin, s); }
  void on_epoch_end(const TrainerState& s) { fire(&TrainerCallback::on_epoch_end, s); }
  void on_step_begin(const TrainerState& s) {
    control_.should_log = control_.should_evaluate = control_.should_save = false;
    fire(&TrainerCallback::on_step_begin, s);
  }
  void on_pre_optimizer_step(const TrainerState& s) { fire(&TrainerCallback::on_pre_optimizer_step, s); }
  void on_optimizer_step(const TrainerState& s) { fire(&TrainerCallback::on_optimizer_step, s); }
  void on_substep_end(const TrainerState& s) { fire(&TrainerCallback::on_substep_end, s); }
  void on_step_end(const TrainerState& s) { fire(&TrainerCallback::on_step_end, s); }
  void on_evaluate(const TrainerState& s, const nlohmann::json& metrics) {
    control_.should_evaluate = false;
    for (auto& c : callbacks_) c->on_evaluate(s, control_, metrics);
  }
  void on_predict(const TrainerState& s, const nlohmann::json& metrics) {
    for (auto& c : callbacks_) c->on_predict(s, control_, metrics);
  }
  void on_save(const TrainerState& s) { control_.should_save = false; fire(&TrainerCallback::on_save, s); }
  void on_log(const TrainerState& s, const nlohmann::json& logs) {
    control_.should_log = false;
    for (auto& c : callbacks_) c->on_log(s, control_, logs);
  }
  void on_prediction_step(const TrainerState& s) { fire(&TrainerCallback::on_prediction_step, s); }

  nlohmann::json export_states() const;
  void import_states(const nlohmann::json& states);

 private:
  void fire(void (TrainerCallback::*event)(const TrainerState&, TrainerControl&), const TrainerState& s) {
    for (auto& c : callbacks_) ((*c).*event)(s, control_);
  }
  std::vector<std::unique_ptr<TrainerCallback>> callbacks_;
  TrainerControl control_;
};

// HF DefaultFlowCallback: turns FlowControl decisions into control flags at step and epoch ends.
class DefaultFlowCallback : public TrainerCallback {
 public:
  explicit DefaultFlowCallback(FlowControl flow) : flow_(std::move(flow)) {}
  std::string name() const override { return "DefaultFlowCallback"; }
  void on_step_end(const TrainerState& s, TrainerControl& c) override;
  void on_epoch_end(const TrainerState& s, TrainerControl& c) override;

 private:
  FlowControl flow_;
};

// HF EarlyStoppingCallback: stop after `early_stopping_patience` evaluations without an improvement of
// metric_for_best_model by more than early_stopping_threshold over state.best_metric.
class EarlyStoppingCallback : public TrainerCallback {
 public:
  struct Options {
    int64_t early_stopping_patience = 1;
    double early_stopping_threshold = 0.0;
    static void declare(Schema<Options>& s);
  };
  // `metric` is the full eval key (e.g. "eval_loss"); `greater_is_better` its direction.
  EarlyStoppingCallback(const Options& options, const std::string& metric, bool greater_is_better);
  std::string name() const override { return "EarlyStoppingCallback"; }
  void on_evaluate(const TrainerState& s, TrainerControl& c, const nlohmann::json& metrics) override;
  nlohmann::json export_state() const override;
  void import_state(const nlohmann::json& state) override;
  int64_t patience_counter() const { return patience_counter_; }

 private:
  Options options_;
  std::string metric_;
  bool greater_is_better_;
  int64_t patience_counter_ = 0;
};

// Context callbacks are built with: the names HF derives from TrainingArguments.
struct CallbackContext {
  std::string metric_for_best_model;  // full key, "eval_..."
  bool greater_is_better = false;
  std::string output_dir;  // training.output_dir
};

// metric_for_best_model as an "eval_"-prefixed key ("loss" when unset) and its direction (HF defaults:
// greater_is_better = the name does not end in "loss").
CallbackContext best_metric_context(const TrainingArgs& args);

}  // namespace hftrain
