// The Adam / AdamW update of the parameters the optimizer kernels do not take (tensors on a GPU, strided
// ones): the arithmetic of torch 1.13's single-tensor Adam, each elementwise op applied to the whole list at
// once through LibTorch's multi-tensor (_foreach_) ops, as torch's default "foreach" Adam does on CUDA: about
// ten launches per parameter group instead of ten per parameter. Every op is the one the single-tensor path
// would apply, in the same order: on the CPU (where LibTorch runs the list ops tensor by tensor) the results
// are the same bit for bit; on CUDA they are those of torch's own foreach Adam, whose list division of the
// denominator divides where a single tensor's division by a host number multiplies by its reciprocal (a last
// bit). The list holds every listed parameter's fp32 gradient (a 16-bit one converted) and the denominators of
// the whole group at once, as torch's foreach Adam does: transient memory of about 8 bytes per parameter.
#pragma once

#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

class AdamForeachList {
 public:
  // One parameter, its fp32 gradient (already unscaled) and moments, and its own step's coefficients:
  // step_size = lr / (1 - beta1^step), bias_correction2_sqrt = sqrt(1 - beta2^step).
  void add(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
           double step_size, double bias_correction2_sqrt);
  bool empty() const { return params_.empty(); }

  // decay: AdamW's 1 - lr * weight_decay, applied to the parameters first (1 for Adam); l2: Adam's weight decay
  // added to the gradients (0 for AdamW).
  void update(bool decoupled, double decay, double l2, double beta1, double beta2, double eps);

 private:
  std::vector<torch::Tensor> params_, grads_, exp_avgs_, exp_avg_sqs_;
  std::vector<c10::Scalar> neg_step_sizes_, bias_correction2_sqrts_;
};

}  // namespace hftrain
