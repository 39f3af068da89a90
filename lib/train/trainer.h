// Trainer: the training loop (epochs -> accumulation windows -> micro-batches -> clip -> optimizer
// -> schedule -> FlowControl). Semantics follow HF Trainer._inner_training_loop.
#pragma once

#include <nlohmann/json.hpp>

#include "train/flow_control.h"
#include "train/pipeline.h"
#include "train/trainer_state.h"

namespace hftrain {

class Trainer {
 public:
  Trainer(const RunSpec& spec, const Components& components, Pipeline& pipeline);

  // Trains to max_steps; writes checkpoints as the save strategy says. Returns the train metrics.
  nlohmann::json train();
  const TrainerState& state() const { return state_; }

 private:
  void log_training(double tr_loss_since_log, double grad_norm, double lr);
  void log(nlohmann::json entry);
  void run_evaluation();
  void save_checkpoint();

  const RunSpec& spec_;
  const Components& components_;
  Pipeline& pipeline_;
  TrainerState state_;
  int64_t last_logged_step_ = 0;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Schedule> schedule_;
};

// Global L2 norm of all gradients; when max_norm > 0 the gradients are scaled by
// min(1, max_norm * 1/(norm + 1e-6)) exactly as torch.nn.utils.clip_grad_norm_ does.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace hftrain
