// `adagrad`: torch.optim.Adagrad (PyTorch 1.13 single-tensor path), HF's training.optim "adagrad".
//   g += wd*p;  sum += g*g;  p -= clr * g / (sqrt(sum) + eps),  clr = lr / (1 + (t-1)*lr_decay)
// Weight decay comes from the parameter group; lr_decay, initial_accumulator_value and eps from the
// `optimizer:` section (torch's defaults: 0, 0, 1e-10; HF passes none of them, so they stay torch's).
#pragma once

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class Adagrad : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/true};
  struct Options {
    double lr_decay = 0.0;
    double initial_accumulator_value = 0.0;
    double eps = 1e-10;
    static void declare(Schema<Options>& s);
  };
  Adagrad(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  bool fuses_low_precision() const override { return true; }
  std::string kernel_description() const override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  struct Slot {
    torch::Tensor sum;
    int64_t step = 0;
  };
  Options options_;
  std::vector<ParamGroup> groups_;
  std::map<std::string, Slot> slots_;
};

}  // namespace hftrain
