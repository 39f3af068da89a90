// `adamw`: AdamW with torch.optim.AdamW semantics (PyTorch 1.13 single-tensor path, amsgrad off).
#pragma once

#include "config/schema.h"
#include "optim/optimizer.h"

namespace hftrain {

class AdamW : public Optimizer {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  AdamW(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  void step(double lr) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  struct Slot {
    torch::Tensor exp_avg, exp_avg_sq;
    int64_t step = 0;
  };
  std::vector<ParamGroup> groups_;
  OptimizerHyper hyper_;
  std::map<std::string, Slot> slots_;
};

}  // namespace hftrain
