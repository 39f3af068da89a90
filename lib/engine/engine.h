// Engine: owns everything between "the loss of a micro-batch" and "updated parameters": backward,
// gradient reduction across workers, global-norm clipping and the optimizer step. One interface for
// every ZeRO stage; this file holds the single-process stage-0 engine the trainer uses today, and the
// data-parallel / ZeRO engines plug in behind the same interface.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "optim/optimizer.h"

namespace hftrain {

struct StepResult {
  double grad_norm = 0;  // global L2 norm of the gradients before clipping
  bool skipped = false;  // the step was skipped (e.g. fp16 overflow); the schedule must not advance
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Backpropagates one micro-batch's (already window-scaled) loss. `is_last_micro_step` marks the end
  // of the accumulation window, where gradient synchronisation happens.
  virtual void backward(const torch::Tensor& loss, bool is_last_micro_step) = 0;
  // Clips to max_grad_norm (when > 0), applies the optimizer at `lr`, clears the gradients.
  virtual StepResult step(double lr) = 0;
  // Named tensors for checkpoints (optimizer state) and their restoration.
  virtual std::map<std::string, torch::Tensor> optimizer_state() const = 0;
  virtual void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) = 0;
};

// Stage 0, one process: plain backward, torch-identical clipping, optimizer over all parameters.
class LocalEngine : public Engine {
 public:
  LocalEngine(std::vector<torch::Tensor> params, std::unique_ptr<Optimizer> optimizer, double max_grad_norm);
  void backward(const torch::Tensor& loss, bool is_last_micro_step) override;
  StepResult step(double lr) override;
  std::map<std::string, torch::Tensor> optimizer_state() const override { return optimizer_->state(); }
  void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) override { optimizer_->load_state(state); }

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Optimizer> optimizer_;
  double max_grad_norm_;
};

// Global L2 norm of all gradients; when max_norm > 0 the gradients are scaled by
// min(1, max_norm * 1/(norm + 1e-6)) exactly as torch.nn.utils.clip_grad_norm_ (1.13) does.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace hftrain
