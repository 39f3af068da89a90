// `adamw_8bit`: AdamW with both moments stored block-wise 8-bit (Dettmers et al. 2021, "8-bit Optimizers
// via Block-wise Quantization", arXiv:2110.02861): first moment in the signed dynamic data type, second in
// the unsigned one, blocks of `block_size` elements (the paper's B = 2048 by default), each step
// dequantising, updating in float32 and quantising again (optim/adam_moments.h). Tensors with fewer than
// min_8bit_size elements keep float32 moments (the per-block scale and the rounding buy nothing there).
// Weight decay is decoupled as in adamw (p *= 1 - lr*wd first); betas / eps from training.adam_*.
// HF's optim names adamw_8bit and adamw_bnb_8bit select it.
#pragma once

#include "config/schema.h"
#include "optim/adam_moments.h"

namespace hftrain {

class AdamW8bit : public Optimizer {
 public:
  struct Options {
    int64_t block_size = 2048;
    int64_t min_8bit_size = 4096;
    static void declare(Schema<Options>& s);
  };
  AdamW8bit(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;

 private:
  AdamMomentsConfig config_for(const torch::Tensor& param) const;
  Options options_;
  std::vector<ParamGroup> groups_;
  OptimizerHyper hyper_;
  std::map<std::string, AdamMoments> slots_;
};

}  // namespace hftrain
