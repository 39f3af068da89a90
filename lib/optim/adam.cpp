// Adam / AdamW (see adam.h). The arithmetic mirrors torch 1.13's _single_tensor_adam and
// _single_tensor_adamw op for op, so results agree with torch.optim on the same kernels.
#include "optim/adam.h"

#include <cmath>

#include "util/error.h"

namespace hftrain {

AdamBase::AdamBase(std::vector<ParamGroup> groups, const OptimizerHyper& hyper, bool decoupled_weight_decay)
    : groups_(std::move(groups)), hyper_(hyper), decoupled_(decoupled_weight_decay) {}

void AdamBase::step(double lr) {
  torch::NoGradGuard no_grad;
  const double beta1 = hyper_.beta1, beta2 = hyper_.beta2;
  for (auto& group : groups_) {
    const double wd = group.weight_decay;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      torch::Tensor grad = param.grad();
      if (!grad.defined()) continue;
      Slot& s = slots_[group.names[i]];
      if (!s.exp_avg.defined()) {
        s.exp_avg = torch::zeros_like(param);
        s.exp_avg_sq = torch::zeros_like(param);
      }
      s.step += 1;
      if (decoupled_) {
        param.mul_(1 - lr * wd);  // AdamW: stepweight decay
      } else if (wd != 0) {
        grad = grad.add(param, wd);  // Adam: L2 penalty in the gradient
      }
      s.exp_avg.mul_(beta1).add_(grad, 1 - beta1);
      s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      const double step = static_cast<double>(s.step);
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      auto denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(hyper_.eps);
      param.addcdiv_(s.exp_avg, denom, -step_size);
    }
  }
}

std::map<std::string, torch::Tensor> AdamBase::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) {
    out[name + ".exp_avg"] = s.exp_avg;
    out[name + ".exp_avg_sq"] = s.exp_avg_sq;
    out[name + ".step"] = torch::tensor(s.step, torch::kLong);
  }
  return out;
}

void AdamBase::load_state(const std::map<std::string, torch::Tensor>& state) {
  slots_.clear();
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const std::string& name = group.names[i];
      const auto shape = group.params[i].sizes();
      torch::Tensor m = find_state(state, name, "exp_avg", shape), v = find_state(state, name, "exp_avg_sq", shape);
      if (!m.defined() && !v.defined()) continue;  // parameter never stepped
      if (!m.defined() || !v.defined() || !state.count(name + ".step"))
        throw RuntimeFailure("optimizer state for '" + name + "' is incomplete (needs exp_avg, exp_avg_sq and step)");
      slots_[name] = Slot{m, v, find_step(state, name)};
    }
  }
}

}  // namespace hftrain
