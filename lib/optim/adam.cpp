// Adam / AdamW (see adam.h). The arithmetic follows torch 1.13's _single_tensor_adam and
// _single_tensor_adamw. For contiguous fp32 CPU tensors the whole update runs as one fused pass over
// memory (torch's nine elementwise ops and two temporaries cost several times the memory traffic);
// other tensors take the op-by-op path. The two differ only by float rounding order.
#include "optim/adam.h"

#include <ATen/Parallel.h>
#include <cmath>

#include "util/error.h"

namespace hftrain {
namespace {

// Scalars of one parameter's update, computed once per step.
struct AdamCoefficients {
  float decay_factor;  // AdamW: 1 - lr * wd (1 for Adam)
  float l2;            // Adam: wd added to the gradient as wd * p (0 for AdamW)
  float beta1, beta2, one_minus_beta1, one_minus_beta2;
  float step_size;          // lr / (1 - beta1^t)
  float inv_bias_correction2_sqrt;  // 1 / sqrt(1 - beta2^t), in float as torch's scalar division does
  float eps;
};

bool fusable(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

// One pass: p, m, v updated in place from g; parallel over chunks on the intra-op threads.
void fused_adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c) {
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float param = p[i] * c.decay_factor;
      const float grad = c.l2 != 0 ? g[i] + c.l2 * p[i] : g[i];
      const float mi = m[i] * c.beta1 + c.one_minus_beta1 * grad;
      const float vi = v[i] * c.beta2 + c.one_minus_beta2 * grad * grad;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) * c.inv_bias_correction2_sqrt + c.eps;
      p[i] = param - c.step_size * (mi / denom);
    }
  });
}

}  // namespace


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
      const double step = static_cast<double>(s.step);
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      const double step_size = lr / bias_correction1;
      const double bias_correction2_sqrt = std::sqrt(bias_correction2);
      if (fusable(param) && fusable(grad) && fusable(s.exp_avg) && fusable(s.exp_avg_sq)) {
        const AdamCoefficients c{static_cast<float>(decoupled_ ? 1 - lr * wd : 1.0),
                                 static_cast<float>(decoupled_ ? 0.0 : wd),
                                 static_cast<float>(beta1),
                                 static_cast<float>(beta2),
                                 static_cast<float>(1 - beta1),
                                 static_cast<float>(1 - beta2),
                                 static_cast<float>(step_size),
                                 1.0f / static_cast<float>(bias_correction2_sqrt),
                                 static_cast<float>(hyper_.eps)};
        fused_adam_update(param.data_ptr<float>(), grad.data_ptr<float>(), s.exp_avg.data_ptr<float>(),
                          s.exp_avg_sq.data_ptr<float>(), param.numel(), c);
        continue;
      }
      if (decoupled_) {
        param.mul_(1 - lr * wd);  // AdamW: stepweight decay
      } else if (wd != 0) {
        grad = grad.add(param, wd);  // Adam: L2 penalty in the gradient
      }
      s.exp_avg.mul_(beta1).add_(grad, 1 - beta1);
      s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
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
