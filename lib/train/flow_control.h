// FlowControl: decides after each optimizer step and each epoch whether to log, evaluate, save or
// stop, following HF's DefaultFlowCallback rules. Pure logic (no LibTorch), pinned by unit tests.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {

struct TrainingArgs;

struct FlowDecision {
  bool should_log = false;
  bool should_evaluate = false;
  bool should_save = false;
  bool should_training_stop = false;
};

// HF TrainerState.compute_steps: a value < 1 is a ratio of max_steps (rounded up), else an integer.
int64_t resolve_interval(double value, int64_t max_steps);

class FlowControl {
 public:
  FlowControl(const TrainingArgs& args, int64_t max_steps);

  FlowDecision on_step_end(int64_t global_step) const;
  FlowDecision on_epoch_end(double epoch) const;

  int64_t max_steps() const { return max_steps_; }
  int64_t logging_steps() const { return logging_steps_; }
  int64_t eval_steps() const { return eval_steps_; }
  int64_t save_steps() const { return save_steps_; }

 private:
  std::string logging_strategy_, eval_strategy_, save_strategy_;
  bool logging_first_step_;
  double eval_delay_;
  int64_t max_steps_, logging_steps_, eval_steps_, save_steps_;
};

}  // namespace hftrain
