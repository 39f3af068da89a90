// AdaLomo (see adalomo.h).
#include "optim/adalomo.h"

#include "optim/step_tensors.h"

namespace hftrain {

void AdaLomo::Options::declare(Schema<Options>& s) {
  s.add("clip_threshold", &Options::clip_threshold, "Grouped update normalisation: cap on each update's RMS.")
      .greater_than(0);
  s.add("decay_rate", &Options::decay_rate, "beta2_t = 1 - t^decay_rate.").max(0);
  s.add("eps1", &Options::eps1, "Added to the squared gradient.").min(0);
  s.add("eps2", &Options::eps2, "Lower bound of the parameter RMS that scales the step.").min(0);
}

AdaLomo::AdaLomo(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper&) : groups_(std::move(groups)) {
  rule_.scale_parameter = true;
  rule_.relative_step = false;
  rule_.clip_threshold = o.clip_threshold;
  rule_.decay_rate = o.decay_rate;
  rule_.eps1 = o.eps1;
  rule_.eps2 = o.eps2;
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) by_name_[g.names[i]] = {g.params[i], g.weight_decay};
}

void AdaLomo::step(double lr, const StepScaling& scaling) {
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i)
      if (g.params[i].grad().defined()) step_parameter(g.names[i], fp32_gradient(g.params[i].grad(), scaling.grad_scale), lr);
}

std::vector<std::pair<std::string, torch::Tensor>> AdaLomo::backward_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) out.emplace_back(g.names[i], g.params[i]);
  return out;
}

void AdaLomo::step_parameter(const std::string& name, const torch::Tensor& grad, double lr) {
  torch::NoGradGuard no_grad;
  auto& [param, wd] = by_name_.at(name);
  const AdafactorUpdate u = adafactor_update(slots_[name], fp32_gradient(grad, 1.0), param, lr, rule_);
  if (wd != 0) param.add_(param, u.decay_alpha(wd));
  param.add_(-u.update);
}

std::map<std::string, torch::Tensor> AdaLomo::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) save_adafactor_state(name, s, out);
  return out;
}

void AdaLomo::load_state(const std::map<std::string, torch::Tensor>& state) {
  slots_.clear();
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      AdafactorState s;
      if (load_adafactor_state(g.names[i], state, g.params[i].sizes(), rule_, &s)) slots_[g.names[i]] = s;
    }
}

}  // namespace hftrain
