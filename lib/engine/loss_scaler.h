// Loss scaling for 16-bit training with DeepSpeed's exact rules (deepspeed/runtime/fp16/loss_scaler.py):
// the loss is multiplied by the scale before backward, gradients are divided by it before the update,
// and an overflow (inf/nan in any gradient) skips the step and, for the dynamic scaler, shrinks the
// scale once the hysteresis is used up; after `window` steps without overflow the scale doubles.
//   static  (precision.loss_scale > 0, and bf16/fp32 with scale 1): the scale never changes.
//   dynamic (fp16 with loss_scale 0): DynamicLossScaler(init 2^initial_scale_power, scale_window,
//            min_scale, delayed_shift = hysteresis, consecutive_hysteresis), update once per step.
// The state (scale, iteration, last overflow, remaining hysteresis) is saved in checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "util/torch_compat.h"

namespace hftrain {

struct LossScalerConfig {
  bool dynamic = false;
  double static_scale = 1.0;        // the scale when not dynamic
  int64_t initial_scale_power = 16;  // dynamic: starts at 2^N
  int64_t scale_window = 1000;       // dynamic: overflow-free steps before the scale doubles
  int64_t hysteresis = 2;            // dynamic: overflows tolerated before the scale halves (delayed_shift)
  bool consecutive_hysteresis = false;  // refill the hysteresis after every overflow-free step
  double min_scale = 1.0;
  double scale_factor = 2.0;
  bool raise_error_at_min_scale = true;  // an overflow at the minimum scale ends the run (DeepSpeed's default)
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {});

  double scale() const { return cur_scale_; }
  bool dynamic() const { return config_.dynamic; }
  // Called once per optimizer step, skipped steps included, with whether the gradients overflowed.
  // At the minimum scale an overflow throws RuntimeFailure (raise_error_at_min_scale).
  void update(bool overflow);

  // Checkpoint state as named scalar tensors ("loss_scaler.cur_scale", ...), and its restoration;
  // `source` names the file in errors. Returns false when `state` holds no scaler state (a checkpoint
  // of a run without dynamic scaling): the scaler then keeps its initial state.
  std::map<std::string, torch::Tensor> state() const;
  bool load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source);

  int64_t iteration() const { return cur_iter_; }
  int64_t hysteresis_left() const { return cur_hysteresis_; }

 private:
  LossScalerConfig config_;
  double cur_scale_;
  int64_t cur_iter_ = 0;
  int64_t last_overflow_iter_ = -1;
  int64_t cur_hysteresis_;
};

}  // namespace hftrain
