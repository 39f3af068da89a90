// `adam` and `adamw`: torch.optim.Adam and torch.optim.AdamW (PyTorch 1.13 single-tensor path,
// amsgrad off). betas / eps come from training.adam_beta1/2 and adam_epsilon, weight decay from the
// parameter group (HF's decay / no-decay split). AdamW decays decoupled, p *= 1 - lr*wd, before the
// moments; Adam adds wd*p to the gradient (L2), exactly as torch does with its `weight_decay`.
#pragma once

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class AdamBase : public Optimizer {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/true};
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  bool fuses_low_precision() const override { return true; }
  std::string kernel_description() const override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 protected:
  AdamBase(std::vector<ParamGroup> groups, const OptimizerHyper& hyper, bool decoupled_weight_decay);

 private:
  struct Slot {
    torch::Tensor exp_avg, exp_avg_sq;
    int64_t step = 0;
  };
  std::vector<ParamGroup> groups_;
  OptimizerHyper hyper_;
  bool decoupled_;
  std::map<std::string, Slot> slots_;
};

class Adam : public AdamBase {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  Adam(const Options&, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
      : AdamBase(std::move(groups), hyper, /*decoupled_weight_decay=*/false) {}
};

class AdamW : public AdamBase {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  AdamW(const Options&, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
      : AdamBase(std::move(groups), hyper, /*decoupled_weight_decay=*/true) {}
};

}  // namespace hftrain
