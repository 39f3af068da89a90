// Lion (see lion.h).
#include "optim/lion.h"

#include "util/error.h"

namespace hftrain {
namespace {

std::string beta_rule(const std::optional<double>& v) {
  if (v && !(*v >= 0 && *v < 1)) return "must be in [0, 1), got " + format_number(*v);
  return "";
}

}  // namespace

void Lion::Options::declare(Schema<Options>& s) {
  s.add("beta1", &Options::beta1, "Interpolation factor for the update direction; null = training.adam_beta1.")
      .check(beta_rule);
  s.add("beta2", &Options::beta2, "Momentum decay; null = training.adam_beta2 (the Lion paper suggests 0.99).")
      .check(beta_rule);
}

Lion::Lion(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
    : groups_(std::move(groups)), beta1_(options.beta1.value_or(hyper.beta1)), beta2_(options.beta2.value_or(hyper.beta2)) {}

void Lion::step(double lr) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const torch::Tensor& grad = param.grad();
      if (!grad.defined()) continue;
      torch::Tensor& m = exp_avg_[group.names[i]];
      if (!m.defined()) m = torch::zeros_like(param);
      param.mul_(1 - lr * group.weight_decay);
      auto update = m.mul(beta1_).add_(grad, 1 - beta1_).sign_();
      param.add_(update, -lr);
      m.mul_(beta2_).add_(grad, 1 - beta2_);
    }
  }
}

std::map<std::string, torch::Tensor> Lion::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, m] : exp_avg_) out[name + ".exp_avg"] = m;
  return out;
}

void Lion::load_state(const std::map<std::string, torch::Tensor>& state) {
  exp_avg_.clear();
  for (auto& group : groups_)
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      torch::Tensor m = find_state(state, group.names[i], "exp_avg", group.params[i].sizes());
      if (m.defined()) exp_avg_[group.names[i]] = m;
    }
}

}  // namespace hftrain
