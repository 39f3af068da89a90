// Adafactor (see adafactor.h). The op order follows transformers' Adafactor.step so that results
// agree with it in float32, including where HF's step size is a float32 tensor (scale_parameter).
#include "optim/adafactor.h"

#include <cmath>

#include "util/error.h"

namespace hftrain {
namespace {

// RMS(x) = ||x||_2 / sqrt(numel), a float32 0-dim tensor as in HF's _rms.
torch::Tensor rms(const torch::Tensor& x) {
  return x.norm(2) / std::sqrt(static_cast<double>(x.numel()));
}

}  // namespace

Adafactor::Adafactor(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper&)
    : options_(options), groups_(std::move(groups)) {
  if (options_.warmup_init && !options_.relative_step)
    throw ConfigError("optimizer.warmup_init: warmup_init: true requires relative_step: true");
}

double AdafactorUpdate::decay_alpha(double wd) const {
  return lr_t.defined() ? (lr_t * -wd).item<double>() : -wd * lr;
}

AdafactorUpdate adafactor_update(AdafactorState& s, const torch::Tensor& grad, const torch::Tensor& param, double lr_in,
                                 const AdafactorOptions& o) {
  const bool factored = grad.dim() >= 2;
  if (s.step == 0) {
    if (o.beta1) s.exp_avg = torch::zeros_like(grad);
    if (factored) {
      auto shape = grad.sizes().vec();
      std::vector<int64_t> row(shape.begin(), shape.end() - 1);
      std::vector<int64_t> col(shape.begin(), shape.end() - 2);
      col.push_back(shape.back());
      s.exp_avg_sq_row = torch::zeros(row, grad.options());
      s.exp_avg_sq_col = torch::zeros(col, grad.options());
    } else {
      s.exp_avg_sq = torch::zeros_like(grad);
    }
  }
  s.step += 1;
  const double t = static_cast<double>(s.step);

  // Step size (HF _get_lr): a double, or a float32 tensor when scaled by the parameter's RMS.
  double rel_step = lr_in;
  if (o.relative_step) {
    const double min_step = o.warmup_init ? 1e-6 * t : 1e-2;
    rel_step = std::min(min_step, 1.0 / std::sqrt(t));
  }
  AdafactorUpdate out;
  out.lr = rel_step;
  if (o.scale_parameter) {
    torch::Tensor param_rms = rms(param);
    if ((param_rms > o.eps2).item<bool>()) {  // HF: max(eps2, RMS)
      out.lr_t = param_rms * rel_step;
    } else {
      out.lr = o.eps2 * rel_step;
    }
  }

  const double beta2t = 1.0 - std::pow(t, o.decay_rate);
  torch::Tensor update = grad.pow(2) + o.eps1;
  if (factored) {
    s.exp_avg_sq_row.mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
    s.exp_avg_sq_col.mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
    auto r_factor = (s.exp_avg_sq_row / s.exp_avg_sq_row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
    auto c_factor = s.exp_avg_sq_col.unsqueeze(-2).rsqrt();
    update = torch::mul(r_factor, c_factor);
    update.mul_(grad);
  } else {
    s.exp_avg_sq.mul_(beta2t).add_(update, 1.0 - beta2t);
    update = s.exp_avg_sq.rsqrt().mul_(grad);
  }
  update.div_((rms(update) / o.clip_threshold).clamp_(1.0));
  if (out.lr_t.defined()) {
    update.mul_(out.lr_t);
  } else {
    update.mul_(out.lr);
  }
  if (o.beta1) {
    s.exp_avg.mul_(*o.beta1).add_(update, 1 - *o.beta1);
    update = s.exp_avg;
  }
  out.update = update;
  return out;
}

void save_adafactor_state(const std::string& name, const AdafactorState& s, std::map<std::string, torch::Tensor>& out) {
  out[name + ".step"] = torch::tensor(s.step, torch::kLong);
  if (s.exp_avg.defined()) out[name + ".exp_avg"] = s.exp_avg;
  if (s.exp_avg_sq_row.defined()) out[name + ".exp_avg_sq_row"] = s.exp_avg_sq_row;
  if (s.exp_avg_sq_col.defined()) out[name + ".exp_avg_sq_col"] = s.exp_avg_sq_col;
  if (s.exp_avg_sq.defined()) out[name + ".exp_avg_sq"] = s.exp_avg_sq;
}

bool load_adafactor_state(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                          torch::IntArrayRef shape_ref, const AdafactorOptions& o, AdafactorState* out) {
  if (!state.count(name + ".step")) return false;  // never stepped
  const auto shape = shape_ref.vec();
  AdafactorState s;
  s.step = find_step(state, name);
  if (o.beta1) s.exp_avg = find_state(state, name, "exp_avg", shape);
  if (shape.size() >= 2) {
    std::vector<int64_t> row(shape.begin(), shape.end() - 1), col(shape.begin(), shape.end() - 2);
    col.push_back(shape.back());
    s.exp_avg_sq_row = find_state(state, name, "exp_avg_sq_row", row);
    s.exp_avg_sq_col = find_state(state, name, "exp_avg_sq_col", col);
  } else {
    s.exp_avg_sq = find_state(state, name, "exp_avg_sq", shape);
  }
  const bool complete = (!o.beta1 || s.exp_avg.defined()) &&
                        (shape.size() >= 2 ? s.exp_avg_sq_row.defined() && s.exp_avg_sq_col.defined()
                                           : s.exp_avg_sq.defined());
  if (!complete)
    throw RuntimeFailure("optimizer state for '" + name + "' is incomplete for adafactor" +
                         std::string(o.beta1 ? " (with beta1 it needs exp_avg)" : ""));
  *out = s;
  return true;
}

void Adafactor::step(double lr_in, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& p = group.params[i];
      if (!p.grad().defined()) continue;
      const torch::Tensor grad = scaling.grad_scale == 1.0 ? p.grad() : p.grad().mul(scaling.grad_scale);
      const AdafactorUpdate u = adafactor_update(slots_[group.names[i]], grad, p, lr_in, options_);
      if (group.weight_decay != 0) p.add_(p, u.decay_alpha(group.weight_decay));
      p.add_(-u.update);
    }
  }
}

std::map<std::string, torch::Tensor> Adafactor::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, s] : slots_) save_adafactor_state(name, s, out);
  return out;
}

void Adafactor::load_state(const std::map<std::string, torch::Tensor>& state) {
  slots_.clear();
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      AdafactorState s;
      if (load_adafactor_state(group.names[i], state, group.params[i].sizes(), options_, &s)) slots_[group.names[i]] = s;
    }
  }
}

}  // namespace hftrain
