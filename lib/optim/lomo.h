// `lomo`: LOMO (Lv et al. 2023, "Full Parameter Fine-tuning for Large Language Models with Limited
// Resources", arXiv:2306.09782): plain SGD fused into backward, no optimizer state. Each parameter is
// updated as soon as its gradient is complete (engine/backward_stepper.h), p *= 1 - lr*wd; p -= lr*g, and
// the gradient is freed. Gradient-norm clipping, as the paper does it: when training.max_grad_norm > 0 the
// engine runs backward twice, the first pass only measuring the global norm, the second updating with
// the clip coefficient min(1, max_norm / (norm + 1e-6)) (torch's). Needs gradient_accumulation_steps 1.
#pragma once

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class Lomo : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/false, /*steps_in_backward=*/true,
                                             /*clips_with_second_backward=*/true};
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  Lomo(const Options&, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  // The same update for every parameter with a gradient (used only where backward did not step).
  void step(double lr, const StepScaling& scaling) override;
  bool steps_in_backward() const override { return true; }
  std::vector<std::pair<std::string, torch::Tensor>> backward_parameters() const override;
  void step_parameter(const std::string& name, const torch::Tensor& grad, double lr) override;
  std::map<std::string, torch::Tensor> state() const override { return {}; }
  void load_state(const std::map<std::string, torch::Tensor>&) override {}

 private:
  std::vector<ParamGroup> groups_;
  std::map<std::string, std::pair<torch::Tensor, double>> by_name_;  // parameter and its weight decay
};

}  // namespace hftrain
