// SGD (see sgd.h); mirrors torch 1.13 _single_tensor_sgd op for op.
#include "optim/sgd.h"

#include "util/error.h"

namespace hftrain {

void Sgd::Options::declare(Schema<Options>& s) {
  s.add("momentum", &Options::momentum, "Momentum factor (0 = plain SGD).").min(0);
  s.add("dampening", &Options::dampening, "Dampening for momentum: buf = momentum*buf + (1-dampening)*g.").min(0);
  s.add("nesterov", &Options::nesterov, "Nesterov momentum (needs momentum > 0 and dampening 0).");
}

Sgd::Sgd(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper&)
    : options_(options), groups_(std::move(groups)) {
  // torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening".
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0))
    throw ConfigError("optimizer.nesterov: Nesterov momentum requires momentum > 0 and dampening 0 (got momentum " +
                      format_number(options_.momentum) + ", dampening " + format_number(options_.dampening) + ")");
}

void Sgd::step(double lr) {
  torch::NoGradGuard no_grad;
  const double momentum = options_.momentum;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      torch::Tensor d_p = param.grad();
      if (!d_p.defined()) continue;
      if (group.weight_decay != 0) d_p = d_p.add(param, group.weight_decay);
      if (momentum != 0) {
        torch::Tensor& buf = momentum_buffer_[group.names[i]];
        if (!buf.defined()) {
          buf = d_p.clone().detach();
        } else {
          buf.mul_(momentum).add_(d_p, 1 - options_.dampening);
        }
        d_p = options_.nesterov ? d_p.add(buf, momentum) : buf;
      }
      param.add_(d_p, -lr);
    }
  }
}

std::map<std::string, torch::Tensor> Sgd::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, buf] : momentum_buffer_) out[name + ".momentum_buffer"] = buf;
  return out;
}

void Sgd::load_state(const std::map<std::string, torch::Tensor>& state) {
  momentum_buffer_.clear();
  for (auto& group : groups_)
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      torch::Tensor buf = find_state(state, group.names[i], "momentum_buffer", group.params[i].sizes());
      if (buf.defined()) momentum_buffer_[group.names[i]] = buf;
    }
}

}  // namespace hftrain
