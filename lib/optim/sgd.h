// `sgd`: torch.optim.SGD (PyTorch 1.13 single-tensor path). Options: momentum, dampening, nesterov.
// Weight decay (from the parameter group) is added to the gradient, as torch does: d = g + wd*p.
#pragma once

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class Sgd : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/true};
  struct Options {
    double momentum = 0.0;
    double dampening = 0.0;
    bool nesterov = false;
    static void declare(Schema<Options>& s);
  };
  // Throws ConfigError (naming optimizer.nesterov) for nesterov without momentum or with dampening.
  Sgd(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  bool fuses_low_precision() const override { return true; }
  std::string kernel_description() const override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  Options options_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, torch::Tensor> momentum_buffer_;
};

}  // namespace hftrain
