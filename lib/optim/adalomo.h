// `adalomo`: AdaLomo (Lv et al. 2024, "AdaLomo: Low-memory Optimization with Adaptive Learning Rate",
// arXiv:2310.10195, Algorithm 1): LOMO's fused backward update with an adaptive learning rate from a
// non-negative-matrix-factorised second moment (Adafactor's row / column statistics, beta2_t = 1 -
// t^decay_rate, eps1 added to g^2), grouped update normalisation (each parameter's update divided by
// max(1, RMS(U) / clip_threshold)) and a step scaled by the parameter's RMS:
//   eta_t = lr * max(eps2, RMS(theta_{t-1}));  theta_t = (1 - eta_t wd) theta_{t-1} - eta_t U_hat.
// That is Adafactor's update with scale_parameter on and no first moment (optim/adafactor.h computes it).
// Global gradient-norm clipping (training.max_grad_norm > 0) as for lomo: a first backward measures the norm.
#pragma once

#include "config/schema.h"
#include "optim/adafactor.h"

namespace hftrain {

class AdaLomo : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/false, /*steps_in_backward=*/true,
                                             /*clips_with_second_backward=*/true};
  struct Options {
    double clip_threshold = 1.0;
    double decay_rate = -0.8;
    double eps1 = 1e-30;
    double eps2 = 1e-3;
    static void declare(Schema<Options>& s);
  };
  AdaLomo(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  bool steps_in_backward() const override { return true; }
  std::vector<std::pair<std::string, torch::Tensor>> backward_parameters() const override;
  void step_parameter(const std::string& name, const torch::Tensor& grad, double lr) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  AdafactorOptions rule_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, std::pair<torch::Tensor, double>> by_name_;
  std::map<std::string, AdafactorState> slots_;
};

}  // namespace hftrain
