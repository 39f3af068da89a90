// AdamW (see adamw.h). The arithmetic mirrors torch 1.13's _single_tensor_adamw op for op, so results
// agree with Python's torch.optim.AdamW on the same kernels.
#include "optim/adamw.h"

#include <cmath>

#include "util/error.h"

namespace hftrain {

AdamW::AdamW(const Options&, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
    : groups_(std::move(groups)), hyper_(hyper) {}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  const double beta1 = hyper_.beta1, beta2 = hyper_.beta2;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const auto& grad = param.grad();
      if (!grad.defined()) continue;
      Slot& s = slots_[group.names[i]];
      if (!s.exp_avg.defined()) {
        s.exp_avg = torch::zeros_like(param);
        s.exp_avg_sq = torch::zeros_like(param);
      }
      s.step += 1;
      param.mul_(1 - lr * group.weight_decay);
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

std::map<std::string, torch::Tensor> AdamW::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) {
    out[name + ".exp_avg"] = s.exp_avg;
    out[name + ".exp_avg_sq"] = s.exp_avg_sq;
    out[name + ".step"] = torch::tensor(s.step, torch::kLong);
  }
  return out;
}

void AdamW::load_state(const std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const std::string& name = group.names[i];
      auto m = state.find(name + ".exp_avg"), v = state.find(name + ".exp_avg_sq"), st = state.find(name + ".step");
      if (m == state.end() || v == state.end() || st == state.end()) continue;  // parameter never stepped
      if (!m->second.sizes().equals(group.params[i].sizes()) || !v->second.sizes().equals(group.params[i].sizes()))
        throw RuntimeFailure("optimizer state for '" + name + "' has the wrong shape");
      Slot& s = slots_[name];
      s.exp_avg = m->second.clone();
      s.exp_avg_sq = v->second.clone();
      s.step = st->second.item<int64_t>();
    }
  }
}

}  // namespace hftrain
