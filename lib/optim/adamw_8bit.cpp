// AdamW with 8-bit block-wise quantised moments (see adamw_8bit.h).
#include "optim/adamw_8bit.h"

#include "optim/step_tensors.h"

namespace hftrain {

void AdamW8bit::Options::declare(Schema<Options>& s) {
  s.add("block_size", &Options::block_size,
        "Elements per quantisation block (one float32 absmax each); the 8-bit optimizers paper uses 2048.")
      .min(16);
  s.add("min_8bit_size", &Options::min_8bit_size,
        "Tensors with fewer elements keep float32 moments (0 = quantise every tensor).")
      .min(0);
}

AdamW8bit::AdamW8bit(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
    : options_(options), groups_(std::move(groups)), hyper_(hyper) {}

AdamMomentsConfig AdamW8bit::config_for(const torch::Tensor& param) const {
  AdamMomentsConfig c{hyper_.beta1, hyper_.beta2, hyper_.eps};
  c.quantized = param.numel() >= options_.min_8bit_size;
  c.block_size = options_.block_size;
  return c;
}

void AdamW8bit::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      if (!param.grad().defined()) continue;
      const torch::Tensor grad = fp32_gradient(param.grad(), scaling.grad_scale);
      auto it = slots_.find(group.names[i]);
      if (it == slots_.end()) it = slots_.emplace(group.names[i], AdamMoments(param.sizes(), config_for(param))).first;
      param.mul_(1 - lr * group.weight_decay);
      it->second.update_param(param, grad, lr);
    }
  }
}

std::map<std::string, torch::Tensor> AdamW8bit::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) s.save(name, out);
  return out;
}

void AdamW8bit::load_state(const std::map<std::string, torch::Tensor>& state) {
  slots_.clear();
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      AdamMoments m;
      if (m.load(group.names[i], state, group.params[i].sizes(), config_for(group.params[i])))
        slots_.emplace(group.names[i], std::move(m));
    }
  }
}

}  // namespace hftrain
