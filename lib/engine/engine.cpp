// Single-process engine and gradient clipping (see engine.h).
#include "engine/engine.h"

namespace hftrain {

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(torch::linalg::vector_norm(p.grad().detach(), 2, c10::nullopt, false, c10::nullopt));
  if (norms.empty()) return 0.0;
  auto total = torch::linalg::vector_norm(torch::stack(norms), 2, c10::nullopt, false, c10::nullopt);
  if (max_norm > 0) {
    // Same rounding as torch 1.13: reciprocal first, then scale.
    auto coef = torch::clamp((total + 1e-6).reciprocal() * max_norm, c10::nullopt, 1.0);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().detach().mul_(coef);
  }
  return total.item<double>();
}

LocalEngine::LocalEngine(std::vector<torch::Tensor> params, std::unique_ptr<Optimizer> optimizer, double max_grad_norm)
    : params_(std::move(params)), optimizer_(std::move(optimizer)), max_grad_norm_(max_grad_norm) {}

void LocalEngine::backward(const torch::Tensor& loss, bool) { loss.backward(); }

StepResult LocalEngine::step(double lr) {
  StepResult r;
  r.grad_norm = clip_grad_norm(params_, max_grad_norm_);
  optimizer_->step(lr);
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  return r;
}

EngineMemory LocalEngine::memory() const {
  EngineMemory m;
  for (const auto& p : params_) {
    m.param_bytes += static_cast<int64_t>(p.nbytes());
    if (p.requires_grad()) m.grad_bytes += static_cast<int64_t>(p.nbytes());
  }
  for (const auto& kv : optimizer_->state()) m.optimizer_state_bytes += static_cast<int64_t>(kv.second.nbytes());
  return m;
}

}  // namespace hftrain
