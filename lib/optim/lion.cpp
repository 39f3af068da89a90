// Lion (see lion.h): one pass in the optimizer kernels for contiguous CPU tensors, otherwise op by op.
#include "optim/lion.h"

#include "optim/step_tensors.h"
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

void Lion::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const StepTensors in = step_tensors(group, i);
      if (!in.grad.defined()) continue;
      torch::Tensor& m = exp_avg_[group.names[i]];
      if (!m.defined()) m = torch::zeros_like(param);
      optim_kernels::Stream stream;
      if (kernel_stream(param, in, scaling.grad_scale, &stream) && kernel_state(m, stream)) {
        optim_kernels::LionCoef c;
        c.lr = static_cast<float>(lr);
        c.decay = static_cast<float>(1 - lr * group.weight_decay);
        c.beta1 = static_cast<float>(beta1_);
        c.one_minus_beta1 = static_cast<float>(1 - beta1_);
        c.beta2 = static_cast<float>(beta2_);
        c.one_minus_beta2 = static_cast<float>(1 - beta2_);
        optim_kernels::lion_update(stream, m.data_ptr<float>(), c);
        continue;
      }
      const torch::Tensor grad = fp32_gradient(in.grad, scaling.grad_scale);
      param.mul_(1 - lr * group.weight_decay);
      auto update = m.mul(beta1_).add_(grad, 1 - beta1_).sign_();
      param.add_(update, -lr);
      m.mul_(beta2_).add_(grad, 1 - beta2_);
      write_out16(in, param);
    }
  }
}

std::string Lion::kernel_description() const { return hftrain::kernel_description(groups_); }

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
