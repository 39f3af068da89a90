// Adagrad (see adagrad.h): one pass in the optimizer kernels for contiguous CPU tensors, otherwise torch
// 1.13's _single_tensor_adagrad op for op.
#include "optim/adagrad.h"

#include "optim/step_tensors.h"
#include "util/error.h"

namespace hftrain {

void Adagrad::Options::declare(Schema<Options>& s) {
  s.add("lr_decay", &Options::lr_decay, "Learning-rate decay: the step t uses lr / (1 + (t-1)*lr_decay).").min(0);
  s.add("initial_accumulator_value", &Options::initial_accumulator_value,
        "Starting value of the sum of squared gradients.")
      .min(0);
  s.add("eps", &Options::eps, "Added to sqrt(sum) in the denominator (torch.optim.Adagrad's eps).").min(0);
}

Adagrad::Adagrad(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper&)
    : options_(options), groups_(std::move(groups)) {}

void Adagrad::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    const double wd = group.weight_decay;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const StepTensors in = step_tensors(group, i);
      if (!in.grad.defined()) continue;
      Slot& s = slots_[group.names[i]];
      if (!s.sum.defined()) s.sum = torch::full_like(param, options_.initial_accumulator_value);
      s.step += 1;
      const double clr = lr / (1 + static_cast<double>(s.step - 1) * options_.lr_decay);
      optim_kernels::Stream stream;
      if (kernel_stream(param, in, scaling.grad_scale, &stream) && kernel_state(s.sum, stream)) {
        optim_kernels::AdagradCoef c;
        c.clr = static_cast<float>(clr);
        c.weight_decay = static_cast<float>(wd);
        c.eps = static_cast<float>(options_.eps);
        optim_kernels::adagrad_update(stream, s.sum.data_ptr<float>(), c);
        continue;
      }
      torch::Tensor grad = fp32_gradient(in.grad, scaling.grad_scale);
      if (wd != 0) grad = grad.add(param, wd);
      s.sum.addcmul_(grad, grad, 1);
      auto std_dev = s.sum.sqrt().add_(options_.eps);
      param.addcdiv_(grad, std_dev, -clr);
      write_out16(in, param);
    }
  }
}

std::string Adagrad::kernel_description() const { return hftrain::kernel_description(groups_); }

std::map<std::string, torch::Tensor> Adagrad::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) {
    out[name + ".sum"] = s.sum;
    out[name + ".step"] = torch::tensor(s.step, torch::kLong);
  }
  return out;
}

void Adagrad::load_state(const std::map<std::string, torch::Tensor>& state) {
  slots_.clear();
  for (auto& group : groups_)
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const std::string& name = group.names[i];
      torch::Tensor sum = find_state(state, name, "sum", group.params[i].sizes());
      if (!sum.defined()) continue;  // parameter never stepped
      if (!state.count(name + ".step"))
        throw RuntimeFailure("optimizer state for '" + name + "' is incomplete (needs sum and step)");
      slots_[name] = Slot{sum, find_step(state, name)};
    }
}

}  // namespace hftrain
