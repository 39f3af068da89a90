// Adam / AdamW over lists of tensors (see adam_foreach.h).
#include "optim/adam_foreach.h"

#include <utility>

namespace hftrain {
namespace {

using Tensors = std::vector<torch::Tensor>;

// The elementwise ops of the update over a list: LibTorch's multi-tensor ops, which exist for CPU and CUDA
// tensors, or the same op tensor by tensor elsewhere (torch's lazy backend, on which the device tests run, has
// no shape rule for them in LibTorch 1.13).
struct ListOps {
  bool multi_tensor;

  void mul_(Tensors& xs, double s) const {
    if (multi_tensor) return at::_foreach_mul_(xs, s);
    for (auto& x : xs) x.mul_(s);
  }
  void add_(Tensors& xs, double s) const {
    if (multi_tensor) return at::_foreach_add_(xs, s);
    for (auto& x : xs) x.add_(s);
  }
  void add_(Tensors& xs, const Tensors& ys, double alpha) const {
    if (multi_tensor) return at::_foreach_add_(xs, ys, alpha);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i].add_(ys[i], alpha);
  }
  Tensors add(const Tensors& xs, const Tensors& ys, double alpha) const {
    if (multi_tensor) return at::_foreach_add(xs, ys, alpha);
    Tensors out;
    for (std::size_t i = 0; i < xs.size(); ++i) out.push_back(xs[i].add(ys[i], alpha));
    return out;
  }
  void addcmul_(Tensors& xs, const Tensors& a, const Tensors& b, double value) const {
    if (multi_tensor) return at::_foreach_addcmul_(xs, a, b, value);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i].addcmul_(a[i], b[i], value);
  }
  Tensors sqrt(const Tensors& xs) const {
    if (multi_tensor) return at::_foreach_sqrt(xs);
    Tensors out;
    for (const auto& x : xs) out.push_back(x.sqrt());
    return out;
  }
  void div_(Tensors& xs, const std::vector<c10::Scalar>& s) const {
    if (multi_tensor) return at::_foreach_div_(xs, s);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i].div_(s[i]);
  }
  void addcdiv_(Tensors& xs, const Tensors& a, const Tensors& b, const std::vector<c10::Scalar>& values) const {
    if (multi_tensor) return at::_foreach_addcdiv_(xs, a, b, values);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i].addcdiv_(a[i], b[i], values[i]);
  }
};

bool multi_tensor_device(const Tensors& xs) {
  for (const auto& x : xs)
    if (!x.device().is_cpu() && !x.device().is_cuda()) return false;
  return true;
}

}  // namespace

void AdamForeachList::add(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
                          const torch::Tensor& exp_avg_sq, double step_size, double bias_correction2_sqrt) {
  params_.push_back(param);
  grads_.push_back(grad);
  exp_avgs_.push_back(exp_avg);
  exp_avg_sqs_.push_back(exp_avg_sq);
  neg_step_sizes_.emplace_back(-step_size);
  bias_correction2_sqrts_.emplace_back(bias_correction2_sqrt);
}

void AdamForeachList::update(bool decoupled, double decay, double l2, double beta1, double beta2, double eps) {
  if (params_.empty()) return;
  torch::NoGradGuard no_grad;
  const ListOps op{multi_tensor_device(params_)};
  Tensors grads = grads_;
  if (decoupled) op.mul_(params_, decay);                 // param.mul_(1 - lr * wd)
  else if (l2 != 0) grads = op.add(grads, params_, l2);  // grad = grad.add(param, wd)
  op.mul_(exp_avgs_, beta1);                             // exp_avg.mul_(beta1).add_(grad, 1 - beta1)
  op.add_(exp_avgs_, grads, 1 - beta1);
  op.mul_(exp_avg_sqs_, beta2);  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
  op.addcmul_(exp_avg_sqs_, grads, grads, 1 - beta2);
  Tensors denom = op.sqrt(exp_avg_sqs_);  // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  op.div_(denom, bias_correction2_sqrts_);
  op.add_(denom, eps);
  op.addcdiv_(params_, exp_avgs_, denom, neg_step_sizes_);  // param.addcdiv_(exp_avg, denom, -step_size)
}

}  // namespace hftrain
