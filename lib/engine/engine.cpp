// Single-process engine and gradient clipping (see engine.h).
#include "engine/engine.h"

#include "checkpoint/checkpoint_files.h"
#include "engine/backward_stepper.h"
#include "engine/partition.h"
#include "log/logger.h"

namespace hftrain {

torch::Tensor clip_coefficient(const torch::Tensor& total_norm, double max_norm) {
  return torch::clamp((total_norm + 1e-6).reciprocal() * max_norm, c10::nullopt, 1.0);
}

torch::Tensor global_grad_norm(const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> norms;
  for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g.detach(), 2, c10::nullopt, false, c10::nullopt));
  if (norms.empty()) return {};
  return at::linalg_vector_norm(torch::stack(norms), 2, c10::nullopt, false, c10::nullopt);
}

DeviceScalar clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  const torch::Tensor total = global_grad_norm(grads);
  if (!total.defined()) return 0.0;
  if (max_norm > 0) {
    const torch::Tensor coef = clip_coefficient(total, max_norm);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().detach().mul_(coef);
  }
  return DeviceScalar::of(total);
}

nlohmann::json EngineCheckpointState::layout_of(int stage, const std::string& parameter_dtype) const {
  nlohmann::json layout = {
      {"zero_stage", stage},
      {"dtypes", {{"parameters", parameter_dtype}, {"master_weights", "fp32"}, {"optimizer_state", "fp32"}}},
      {"optimizer_state", sharded() ? "ZeRO shards (latest)" : ckpt::kOptimizerFile}};
  if (const PartitionMap* map = partition_map()) layout["partition"] = map->to_json();
  return layout;
}

std::map<std::string, torch::Tensor> state_on_device(const std::map<std::string, torch::Tensor>& state, torch::Device device) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : state) out[name] = tensor.defined() && tensor.device() != device ? tensor.to(device) : tensor;
  return out;
}

LocalEngine::LocalEngine(std::vector<torch::Tensor> params, std::unique_ptr<Optimizer> optimizer, double max_grad_norm)
    : params_(std::move(params)), optimizer_(std::move(optimizer)), max_grad_norm_(max_grad_norm) {
  if (optimizer_->steps_in_backward()) stepper_ = std::make_unique<BackwardStepper>(*optimizer_);
}

LocalEngine::~LocalEngine() = default;

void LocalEngine::begin_step(double lr) {
  if (stepper_) stepper_->begin(lr);
}

void LocalEngine::backward(const torch::Tensor& loss, bool) {
  if (stepper_ && max_grad_norm_ > 0) {  // LOMO's clipping: measure the norm, then update in a second pass
    stepper_->measure_pass();
    loss.backward({}, /*retain_graph=*/true);
    stepper_->update_pass(max_grad_norm_);
  }
  loss.backward();
}

StepResult LocalEngine::step(double lr) {
  StepResult r;
  if (stepper_) {  // the update ran inside backward
    r.grad_norm = stepper_->finish();
    for (auto& p : params_) p.mutable_grad() = torch::Tensor();
    if (!reported_) {
      reported_ = true;
      log_info("layer-wise step: at most " + std::to_string(stepper_->peak_grad_bytes()) +
               " gradient bytes alive at once during backward (all gradients together: " +
               std::to_string(stepper_->all_grad_bytes()) + " bytes)");
    }
    return r;
  }
  r.grad_norm = clip_grad_norm(params_, max_grad_norm_);
  optimizer_->step(lr);
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  return r;
}

EngineMemory LocalEngine::memory() const {
  EngineMemory m;
  for (const auto& p : params_) {
    m.param_bytes += static_cast<int64_t>(p.nbytes());
    if (p.requires_grad() && !stepper_) m.grad_bytes += static_cast<int64_t>(p.nbytes());
  }
  if (stepper_) m.grad_transient_peak = stepper_->peak_grad_bytes();
  for (const auto& kv : optimizer_->state()) m.optimizer_state_bytes += static_cast<int64_t>(kv.second.nbytes());
  return m;
}

void LocalEngine::load_optimizer_state(const std::map<std::string, torch::Tensor>& state) {
  optimizer_->load_state(params_.empty() ? state : state_on_device(state, params_.front().device()));
}

}  // namespace hftrain
