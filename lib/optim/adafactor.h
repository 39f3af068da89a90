// `adafactor`: Adafactor (Shazeer & Stern 2018) with the semantics of transformers.optimization.Adafactor.
// Second moments are factored (row and column running means) for parameters with >= 2 dimensions and
// full for vectors; beta2_t = 1 - t^decay_rate; the update is RMS-clipped to clip_threshold; an optional
// first moment (beta1); weight decay from the parameter group, p -= wd*lr*p.
//
// Defaults follow HF's *Trainer* (optim "adafactor"), which builds Adafactor with
// scale_parameter=False and relative_step=False, so training.learning_rate and the schedule drive it
// like any other optimizer. With relative_step: true the learning rate passed in is IGNORED and the
// relative step min(1e-2 (or 1e-6*t with warmup_init), 1/sqrt(t)) is used, as HF does when lr is None;
// the logged learning_rate is then the schedule's and not the one applied. scale_parameter: true
// multiplies the step by max(eps2, RMS(p)).
// Factoring needs whole parameters: a ZeRO shard of a matrix is not a matrix.
#pragma once

#include <optional>

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class Adafactor : public Optimizer {
 public:
  struct Options {
    bool scale_parameter = false;
    bool relative_step = false;
    bool warmup_init = false;
    double clip_threshold = 1.0;
    double decay_rate = -0.8;
    std::optional<double> beta1;  // null: no first moment
    double eps1 = 1e-30;
    double eps2 = 1e-3;
    static void declare(Schema<Options>& s);
  };
  // Throws ConfigError (naming optimizer.warmup_init) for warmup_init without relative_step.
  Adafactor(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  struct Slot {
    int64_t step = 0;
    torch::Tensor exp_avg;                         // with beta1
    torch::Tensor exp_avg_sq_row, exp_avg_sq_col;  // factored (>= 2-D)
    torch::Tensor exp_avg_sq;                      // not factored
  };
  Options options_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, Slot> slots_;
};

}  // namespace hftrain
