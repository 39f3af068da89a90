// Trainer: the training loop (epochs -> accumulation windows -> micro-batches -> engine step ->
// schedule -> callbacks deciding log / evaluate / save / stop). Semantics follow HF
// Trainer._inner_training_loop; features plug in as callbacks or engine parts.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "train/callbacks.h"
#include "train/pipeline.h"
#include "train/trainer_state.h"
#include "train/training_plan.h"

namespace hftrain {

class Trainer {
 public:
  Trainer(const RunSpec& spec, const Components& components, Pipeline& pipeline);

  // Trains to max_steps; writes checkpoints as the save strategy says. Returns the train metrics.
  nlohmann::json train();
  const TrainerState& state() const { return state_; }

 private:
  void setup(const TrainingPlan& plan);
  void maybe_log_save_evaluate(double& tr_loss, const StepResult& step);
  void log(nlohmann::json entry);
  nlohmann::json run_evaluation();
  bool update_best_metric(const nlohmann::json& metrics);
  void save_checkpoint();
  void load_best_model();

  const RunSpec& spec_;
  const Components& components_;
  Pipeline& pipeline_;
  TrainerState state_;
  CallbackHandler callbacks_;
  CallbackContext best_;
  int64_t last_logged_step_ = 0;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Schedule> schedule_;
};

}  // namespace hftrain
