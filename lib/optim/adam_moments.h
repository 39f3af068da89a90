// Adam's two moments of one tensor, held either in float32 or block-wise 8-bit (optim/blockwise_quant.h),
// and the moment update shared by `adamw_8bit` and the GaLore optimizers. One update (torch 1.13
// _single_tensor_adamw order): dequantise, m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
// denom = sqrt(v) / sqrt(1 - b2^t) + eps, re-quantise m and v; the caller applies
// -lr / (1 - b1^t) * m / denom (directly, or after projecting it back). As the 8-bit paper does
// (Dettmers et al. 2021, section 2), the step itself uses the freshly updated 32-bit values and only the
// stored state is 8-bit.
#pragma once

#include <map>
#include <string>

#include "optim/blockwise_quant.h"
#include "optim/optimizer.h"

namespace hftrain {

struct AdamMomentsConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool quantized = false;    // 8-bit state (else float32)
  int64_t block_size = 2048;
};

class AdamMoments {
 public:
  struct Work {
    torch::Tensor exp_avg;  // float32 m after this step (the live state in fp32 mode: do not modify)
    torch::Tensor denom;    // sqrt(v) / sqrt(1 - b2^t) + eps
    double step_size = 0;   // lr / (1 - b1^t)
  };
  AdamMoments() = default;
  // Fresh (zero) moments of `shape`.
  AdamMoments(torch::IntArrayRef shape, const AdamMomentsConfig& config);
  int64_t step() const { return step_; }
  // One Adam moment update with gradient `grad` (float32, the moments' shape). The moments stay in host memory
  // (the 8-bit codes are read through host pointers) wherever the gradient is: a device gradient is copied to
  // the host, and Work's tensors come back on its device (as DeepSpeed's CPU Adam keeps state beside a GPU model).
  Work update(const torch::Tensor& grad, double lr);
  // update() and param -= step_size * m / denom in one go. 8-bit moments of a contiguous parameter are
  // processed in runs of whole blocks (about 1M elements), so the float32 working copies never exceed one run
  // (block-wise quantisation is per block, so the result is bitwise that of update()).
  void update_param(torch::Tensor& param, const torch::Tensor& grad, double lr);
  // Checkpoint slots under "<name>.": step, exp_avg / exp_avg_sq (fp32) or exp_avg_q8 / exp_avg_absmax /
  // exp_avg_sq_q8 / exp_avg_sq_absmax (8-bit).
  void save(const std::string& name, std::map<std::string, torch::Tensor>& out) const;
  // Restores save() output for moments of `shape`; false when nothing was saved for `name`; a partial or
  // misshapen entry throws RuntimeFailure naming it.
  bool load(const std::string& name, const std::map<std::string, torch::Tensor>& state, torch::IntArrayRef shape,
            const AdamMomentsConfig& config);
  int64_t state_bytes() const;

 private:
  AdamMomentsConfig config_;
  int64_t step_ = 0;
  torch::Tensor exp_avg_, exp_avg_sq_;  // fp32 mode
  QuantizedTensor q_avg_, q_avg_sq_;    // 8-bit mode
};

}  // namespace hftrain
