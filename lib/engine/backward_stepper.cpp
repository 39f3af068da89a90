// Layer-wise optimizer steps inside backward (see backward_stepper.h).
#include "engine/backward_stepper.h"

#include "engine/engine.h"

namespace hftrain {

BackwardStepper::BackwardStepper(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& [name, param] : optimizer_.backward_parameters()) {
    if (!param.requires_grad()) continue;
    const std::size_t index = entries_.size();
    entries_.push_back(Entry{name, param, 0});
    all_bytes_ += static_cast<int64_t>(param.nbytes());
    entries_.back().hook = param.register_hook([this, index](const torch::Tensor& grad) { on_gradient(index, grad); });
  }
}

BackwardStepper::~BackwardStepper() {
  for (auto& e : entries_) e.param.remove_hook(e.hook);
}

void BackwardStepper::begin(double lr) {
  lr_ = lr;
  norm_sq_ = torch::Tensor();
  measure_only_ = measured_ = false;
  coef_ = torch::Tensor();
}

void BackwardStepper::measure_pass() { measure_only_ = true; }

void BackwardStepper::update_pass(double max_norm) {
  release_held();
  measure_only_ = false;
  measured_ = true;
  const torch::Tensor total = norm_sq_.defined() ? norm_sq_.sqrt().to(torch::kFloat) : torch::zeros({}, torch::kFloat);
  coef_ = clip_coefficient(total, max_norm);  // a float32 value on the gradients' device
}

void BackwardStepper::release_held() {
  for (std::size_t i : held_) entries_[i].param.mutable_grad() = torch::Tensor();
  held_.clear();
}

void BackwardStepper::on_gradient(std::size_t index, const torch::Tensor& grad) {
  release_held();
  int64_t alive = static_cast<int64_t>(grad.nbytes());
  for (const auto& e : entries_)
    if (e.param.grad().defined()) alive += static_cast<int64_t>(e.param.grad().nbytes());
  peak_bytes_ = std::max(peak_bytes_, alive);
  {
    torch::NoGradGuard no_grad;
    if (!measured_) {
      // Each norm in float32, the squares added in double, on the gradients' device (no read per parameter).
      const torch::Tensor n = at::linalg_vector_norm(grad, 2, c10::nullopt, false, c10::nullopt).to(torch::kDouble);
      norm_sq_ = norm_sq_.defined() ? norm_sq_ + n * n : n * n;
    }
    if (!measure_only_) optimizer_.step_parameter(entries_[index].name, coef_.defined() ? grad * coef_ : grad, lr_);
  }
  held_.push_back(index);
}

DeviceScalar BackwardStepper::finish() {
  release_held();
  return norm_sq_.defined() ? DeviceScalar::of(norm_sq_.sqrt()) : DeviceScalar(0.0);
}

}  // namespace hftrain
