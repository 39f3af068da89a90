// LOMO: SGD fused into backward (see lomo.h).
#include "optim/lomo.h"

#include "optim/step_tensors.h"

namespace hftrain {

Lomo::Lomo(const Options&, std::vector<ParamGroup> groups, const OptimizerHyper&) : groups_(std::move(groups)) {
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) by_name_[g.names[i]] = {g.params[i], g.weight_decay};
}

void Lomo::step(double lr, const StepScaling& scaling) {
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i)
      if (g.params[i].grad().defined()) step_parameter(g.names[i], fp32_gradient(g.params[i].grad(), scaling.grad_scale), lr);
}

std::vector<std::pair<std::string, torch::Tensor>> Lomo::backward_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) out.emplace_back(g.names[i], g.params[i]);
  return out;
}

void Lomo::step_parameter(const std::string& name, const torch::Tensor& grad, double lr) {
  torch::NoGradGuard no_grad;
  auto& [param, wd] = by_name_.at(name);
  if (wd != 0) param.mul_(1 - lr * wd);
  param.add_(fp32_gradient(grad, 1.0), -lr);
}

}  // namespace hftrain
