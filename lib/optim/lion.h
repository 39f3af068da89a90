// `lion`: Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2):
//   c = beta1*m + (1-beta1)*g;  p *= 1 - lr*wd;  p -= lr*sign(c);  m = beta2*m + (1-beta2)*g
// with decoupled weight decay from the parameter group (the order bitsandbytes' Lion uses).
// Betas: HF's Trainer builds Lion (optim lion_32bit) with betas (adam_beta1, adam_beta2), so by
// default they come from training.adam_beta1/2 (0.9, 0.999); the paper recommends beta2 0.99, which
// `optimizer.beta2: 0.99` (or training.adam_beta2) selects. Setting them here overrides training.
#pragma once

#include <optional>

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class Lion : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/true};
  struct Options {
    std::optional<double> beta1;
    std::optional<double> beta2;
    static void declare(Schema<Options>& s);
  };
  Lion(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  bool fuses_low_precision() const override { return true; }
  std::string kernel_description() const override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }

 private:
  std::vector<ParamGroup> groups_;
  double beta1_, beta2_;
  std::map<std::string, torch::Tensor> exp_avg_;
};

}  // namespace hftrain
