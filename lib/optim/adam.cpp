// Adam / AdamW (see adam.h). The arithmetic follows torch 1.13's _single_tensor_adam and
// _single_tensor_adamw. For contiguous CPU tensors the whole update runs as one pass over memory in the
// optimizer kernels (optim/kernels; torch's nine elementwise ops and two temporaries cost several times
// the memory traffic); other tensors (a GPU's) take the same ops over the group's list at once
// (optim/adam_foreach.h). The two differ only by float rounding.
#include "optim/adam.h"

#include <cmath>

#include "optim/adam_foreach.h"
#include "optim/step_tensors.h"
#include "util/error.h"

namespace hftrain {

AdamBase::AdamBase(std::vector<ParamGroup> groups, const OptimizerHyper& hyper, bool decoupled_weight_decay)
    : groups_(std::move(groups)), hyper_(hyper), decoupled_(decoupled_weight_decay) {}

void AdamBase::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  const double beta1 = hyper_.beta1, beta2 = hyper_.beta2;
  for (auto& group : groups_) {
    const double wd = group.weight_decay;
    AdamForeachList listed;  // the group's parameters the kernels do not take
    std::vector<std::pair<StepTensors, torch::Tensor>> listed_out16;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const StepTensors in = step_tensors(group, i);
      if (!in.grad.defined()) continue;
      Slot& s = slots_[group.names[i]];
      if (!s.exp_avg.defined()) {
        s.exp_avg = torch::zeros_like(param);
        s.exp_avg_sq = torch::zeros_like(param);
      }
      s.step += 1;
      const double step = static_cast<double>(s.step);
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      optim_kernels::Stream stream;
      if (kernel_stream(param, in, scaling.grad_scale, &stream) && kernel_state(s.exp_avg, stream) &&
          kernel_state(s.exp_avg_sq, stream)) {
        optim_kernels::AdamCoef c;
        c.decay = static_cast<float>(decoupled_ ? 1 - lr * wd : 1.0);
        c.l2 = static_cast<float>(decoupled_ ? 0.0 : wd);
        c.beta1 = static_cast<float>(beta1);
        c.beta2 = static_cast<float>(beta2);
        c.one_minus_beta1 = static_cast<float>(1 - beta1);
        c.one_minus_beta2 = static_cast<float>(1 - beta2);
        c.step_size = static_cast<float>(step_size);
        c.inv_bias_correction2_sqrt = 1.0f / static_cast<float>(bias_correction2_sqrt);  // as torch's float division
        c.eps = static_cast<float>(hyper_.eps);
        optim_kernels::adam_update(stream, s.exp_avg.data_ptr<float>(), s.exp_avg_sq.data_ptr<float>(), c);
        continue;
      }
      listed.add(param, fp32_gradient(in.grad, scaling.grad_scale), s.exp_avg, s.exp_avg_sq, step_size, bias_correction2_sqrt);
      if (in.out16.defined()) listed_out16.emplace_back(in, param);
    }
    // AdamW: stepweight decay on the parameter; Adam: L2 penalty in the gradient.
    listed.update(decoupled_, 1 - lr * wd, decoupled_ ? 0.0 : wd, beta1, beta2, hyper_.eps);
    for (const auto& [in, param] : listed_out16) write_out16(in, param);
  }
}

std::string AdamBase::kernel_description() const { return hftrain::kernel_description(groups_); }

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
