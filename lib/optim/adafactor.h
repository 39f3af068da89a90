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

// Adafactor's options; shared with galore_adafactor, whose Options holds the same members.
struct AdafactorOptions {
  bool scale_parameter = false;
  bool relative_step = false;
  bool warmup_init = false;
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  std::optional<double> beta1;  // null: no first moment
  double eps1 = 1e-30;
  double eps2 = 1e-3;
};
// Declares AdafactorOptions' members on a schema of O (O derives from AdafactorOptions).
template <class O>
void declare_adafactor_options(Schema<O>& s);

// One tensor's Adafactor state and update (shared with galore_adafactor, which feeds it a projected gradient).
struct AdafactorState {
  int64_t step = 0;
  torch::Tensor exp_avg;                         // with beta1
  torch::Tensor exp_avg_sq_row, exp_avg_sq_col;  // factored (>= 2-D)
  torch::Tensor exp_avg_sq;                      // not factored
};
struct AdafactorUpdate {
  torch::Tensor update;  // subtract from the parameter (step size included)
  torch::Tensor lr_t;    // the step size when it is a tensor (scale_parameter), else undefined
  double lr = 0;         // the step size otherwise
  // p += alpha * p for weight decay wd, in HF's arithmetic.
  double decay_alpha(double wd) const;
};
// Updates `s` with `grad` (fp32) and returns the update; `param` is read for scale_parameter's RMS.
AdafactorUpdate adafactor_update(AdafactorState& s, const torch::Tensor& grad, const torch::Tensor& param, double lr_in,
                                 const AdafactorOptions& o);
void save_adafactor_state(const std::string& name, const AdafactorState& s, std::map<std::string, torch::Tensor>& out);
// false when no state was saved for `name`; incomplete state throws RuntimeFailure naming it.
bool load_adafactor_state(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                          torch::IntArrayRef shape, const AdafactorOptions& o, AdafactorState* out);

class Adafactor : public Optimizer {
 public:
  struct Options : AdafactorOptions {
    static void declare(Schema<Options>& s) { declare_adafactor_options(s); }
  };
  // Throws ConfigError (naming optimizer.warmup_init) for warmup_init without relative_step.
  Adafactor(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  Options options_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, AdafactorState> slots_;
};

template <class O>
void declare_adafactor_options(Schema<O>& s) {
  s.template add<bool>("scale_parameter", &O::scale_parameter, "Scale the step by max(eps2, RMS(parameter)).");
  s.template add<bool>("relative_step", &O::relative_step,
        "Use the time-dependent relative step min(1e-2, 1/sqrt(t)) and ignore the learning rate.");
  s.template add<bool>("warmup_init", &O::warmup_init, "Relative step min(1e-6*t, 1/sqrt(t)) (needs relative_step).");
  s.template add<double>("clip_threshold", &O::clip_threshold, "Clip the update's RMS to this value.").greater_than(0);
  s.template add<double>("decay_rate", &O::decay_rate, "beta2_t = 1 - t^decay_rate.").max(0);
  s.template add<std::optional<double>>("beta1", &O::beta1, "First-moment decay; null = no first moment.")
      .check([](const std::optional<double>& v) -> std::string {
        if (v && !(*v >= 0 && *v < 1)) return "must be in [0, 1) or null, got " + format_number(*v);
        return "";
      });
  s.template add<double>("eps1", &O::eps1, "Added to the squared gradient.").min(0);
  s.template add<double>("eps2", &O::eps2, "Lower bound of the parameter scale.").min(0);
}

}  // namespace hftrain
