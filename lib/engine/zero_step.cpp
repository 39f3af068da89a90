// The ZeroEngine's update rule (see zero_engine.h): one step for every stage, precision and placement of the
// masters -- the gradients this rank updates, their global norm over every rank, the overflow verdict (and the
// loss scale), clipping with torch 1.13's coefficient, the optimizer on the masters, and publishing the updated
// parameters. choose_step_parts() picks each part once, when the engine is built; the step itself branches on
// nothing.
#include <cmath>
#include <limits>

#include "engine/zero_engine.h"
#include "util/fault_injection.h"
#include "util/tensor_bytes.h"

namespace hftrain {
namespace {

// Σ (‖part‖₂ / divisor)² over `parts`, each part's norm in float32 and the squares added in order in double,
// as the host would add them, but on the parts' device: on a GPU a read per part would wait for the device that
// many times a step (a 124M-parameter model has ~120 chunks of 2^20). Only mixed precision's verdict reads it.
class SquaredNormSum {
 public:
  explicit SquaredNormSum(double divisor) : divisor_(divisor) {}
  void add(const torch::Tensor& part) {
    auto n = at::linalg_vector_norm(part, 2, c10::nullopt, false, torch::kFloat).to(torch::kDouble);
    // A 0-dim tensor on the device, not a host number: CUDA multiplies by the reciprocal of a host scalar,
    // which is not the host's division when the loss scale is not a power of two.
    if (divisor_ != 1.0) n = n / torch::scalar_tensor(divisor_, n.options());
    sum_ = sum_.defined() ? sum_ + n * n : n * n;
  }
  // The sum as a one-element double tensor (zero on `device` when nothing was added).
  torch::Tensor tensor(torch::Device device) const {
    return sum_.defined() ? sum_.reshape({1}) : torch::zeros({1}, torch::TensorOptions(torch::kDouble).device(device));
  }

 private:
  double divisor_;
  torch::Tensor sum_;
};

// Test hook: rank 0's gradients overflow.
void inject_overflow(std::vector<torch::Tensor>& grads, int rank) {
  if (fault::forced_overflow() && rank == 0 && !grads.empty() && grads[0].numel() > 0)
    grads[0][0] = std::numeric_limits<float>::infinity();
}

}  // namespace

StepResult ZeroEngine::update_parameters(double lr) {
  const double scale = scaler_.scale();
  StepGradients grads = gradients_for_step_(scale);
  const GlobalNorm norm = global_norm_(grads);
  StepResult r;
  verdict_(norm, scale, r);
  if (r.skipped) return r;
  double clip = 1.0;
  if (options_.max_grad_norm > 0 && norm.total.defined()) {
    const torch::Tensor coef = clip_coefficient(norm.total, options_.max_grad_norm);  // float32, on the device
    if (grads.fused)
      clip = coef.item<double>();  // the fused pass takes a host factor
    else
      for (auto& g : grads.tensors) g.mul_(coef);
  }
  update_(lr, grads, clip, scale);
  publisher_->publish();
  return r;
}

void ZeroEngine::choose_step_parts() {
  // Where the masters live decides what the step's gradients are and how the optimizer reaches them.
  const bool fused = mixed_ && !host_masters_ && optimizer_->fuses_low_precision();
  auto plain_step = [this](double lr, const StepGradients&, double, double) { optimizer_->step(lr); };
  if (host_masters_) {  // fp32 or mixed: the update runs on host copies of the masters and gradients
    if (mixed_) gradients_for_step_ = [this](double scale) { return fp32_copies(scale, /*on_host=*/true); };
    else gradients_for_step_ = [this](double) { return partition_grads(); };
    update_ = [this](double lr, const StepGradients& g, double, double) { step_masters(lr, g.tensors); };
  } else if (fused) {  // the optimizer reads the 16-bit gradients and writes the 16-bit parameters in its pass
    gradients_for_step_ = [this](double scale) { return fused_grads(scale); };
    update_ = [this](double lr, const StepGradients&, double clip, double scale) {
      optimizer_->step(lr, StepScaling{clip / scale});
    };
  } else if (mixed_) {  // fp32 masters of their own on the device
    gradients_for_step_ = [this](double scale) { return fp32_copies(scale, /*on_host=*/false); };
    update_ = [this](double lr, const StepGradients& g, double, double) { step_masters(lr, g.tensors); };
  } else {  // the masters are the parameters (or stage 3's fp32 shards), their gradients bound at construction
    if (shards_optimizer_) gradients_for_step_ = [this](double) { return partition_grads(); };
    else gradients_for_step_ = [this](double) { return parameter_grads(); };
    update_ = plain_step;
  }
  // The norm: torch's over whole replicated fp32 gradients (bitwise the single-process engine's); otherwise the
  // squared norms summed over what each rank holds (the partitions), or, for replicated 16-bit gradients, a vote
  // on the verdict so that every rank agrees.
  if (!mixed_ && !shards_optimizer_)
    global_norm_ = [](const StepGradients& g) {
      GlobalNorm n;
      n.total = global_grad_norm(g.tensors);
      return n;
    };
  else
    global_norm_ = [this](const StepGradients& g) { return summed_norm(g, shards_optimizer_); };
  if (mixed_)  // an overflow skips the step on every rank and moves the loss scale: the step's one read to the host
    verdict_ = [this](const GlobalNorm& n, double scale, StepResult& r) {
      const double sum = n.sum.item<double>();
      bool overflow = !std::isfinite(sum);
      if (n.vote) overflow = comm_.all_reduce_scalar(overflow ? 1.0 : 0.0, ReduceOp::kMax, "gradient overflow vote") > 0;
      r.grad_norm = overflow && std::isfinite(sum) ? DeviceScalar(std::numeric_limits<double>::infinity())
                                                   : DeviceScalar::of(n.total);
      r.prev_loss_scale = scale;
      scaler_.update(overflow);
      if (scaler_.dynamic() || scale != 1.0) r.loss_scale = scaler_.scale();
      r.skipped = overflow;
    };
  else  // fp32: a non-finite norm skips the step only when asked to (which reads it); the norm stays on the device
    verdict_ = [this](const GlobalNorm& n, double, StepResult& r) {
      r.grad_norm = DeviceScalar::of(n.total);
      r.skipped = options_.skip_nonfinite_steps && !std::isfinite(r.grad_norm.value());
    };
  publisher_ = partitions_params_ ? refresh_persistent(*coordinator_)
               : shards_optimizer_ ? all_gather_partitions(group_comms_, own_params_, flat_.flat)
                                   : publish_nothing();
}

ZeroEngine::StepGradients ZeroEngine::parameter_grads() const {
  StepGradients out;
  for (const auto& group : flat_.params)
    for (const auto& p : group)
      if (p.grad().defined()) out.tensors.push_back(p.grad());
  return out;
}

ZeroEngine::StepGradients ZeroEngine::partition_grads() const { return StepGradients{grads_->step_grads()}; }

ZeroEngine::StepGradients ZeroEngine::fp32_copies(double scale, bool on_host) {
  // The 16-bit gradients this rank updates (whole groups at stage 0, the partition at 1-3) as fp32 copies
  // divided by the loss scale: transient ones on the device, or the host gradient buffers.
  StepGradients out;
  int64_t bytes = 0;
  const std::vector<torch::Tensor>& grads16 = grads_->step_grads();
  for (std::size_t g = 0; g < grads16.size(); ++g) {
    auto g32 = on_host ? host_grads_[g].copy_(grads16[g]) : grads16[g].to(torch::kFloat);
    if (scale != 1.0) g32.mul_(1.0 / scale);
    bytes += on_host ? 0 : tensor_bytes(g32);
    out.tensors.push_back(g32);
  }
  grads_->note_transient(bytes);
  inject_overflow(out.tensors, rank_);
  return out;
}

ZeroEngine::StepGradients ZeroEngine::fused_grads(double scale) {
  // An optimizer that fuses the 16-bit side reads them directly, unscaled and clipped by the factor it is given.
  StepGradients out{grads_->step_grads(), scale, /*fused=*/true};
  grads_->note_transient(0);
  inject_overflow(out.tensors, rank_);
  return out;
}

ZeroEngine::GlobalNorm ZeroEngine::summed_norm(const StepGradients& grads, bool over_partitions) const {
  SquaredNormSum local_sum(grads.divisor);  // fused: 16-bit gradients still multiplied by the loss scale
  for (const auto& g : grads.tensors) {
    if (g.numel() == 0) continue;
    if (!grads.fused) {
      local_sum.add(g);
      continue;
    }
    // 16-bit gradients: the norm in fp32, a chunk at a time (no full fp32 copy).
    const int64_t chunk = int64_t{1} << 20;
    for (int64_t begin = 0; begin < g.numel(); begin += chunk) local_sum.add(g.narrow(0, begin, std::min(chunk, g.numel() - begin)));
  }
  GlobalNorm n;
  // Where the gradients are (host buffers with offload), so that the clip coefficient multiplies them there.
  n.sum = local_sum.tensor(grads.tensors.empty() ? options_.device : grads.tensors.front().device());
  if (world_ > 1) {
    // Partitions: every rank adds its squared partition norm (padding is zero; a non-finite partition makes the
    // sum non-finite everywhere). Replicated gradients: the ranks vote on the verdict.
    if (over_partitions) comm_.all_reduce(n.sum, ReduceOp::kSum, "gradient norm");
    else n.vote = true;
  }
  n.total = n.sum.sqrt().to(torch::kFloat32).reshape({});  // the square root in double, then rounded to float32
  return n;
}

void ZeroEngine::step_masters(double lr, const std::vector<torch::Tensor>& grads32) {
  // Host masters take the (clipped) gradients into their host buffers, unless they were formed there.
  for (std::size_t g = 0; g < host_grads_.size(); ++g)
    if (host_grads_[g].data_ptr() != grads32[g].data_ptr()) host_grads_[g].copy_(grads32[g]);
  set_master_grads(host_grads_.empty() ? grads32 : host_grads_);
  optimizer_->step(lr);
  set_master_grads({});
  write_back_masters();
}

void ZeroEngine::set_master_grads(const std::vector<torch::Tensor>& grads32) {
  const bool attach = !grads32.empty();
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    if (master_views_.empty()) {  // the masters are partitions, one tensor per group
      masters_.tensor(g).mutable_grad() = attach ? grads32[g] : torch::Tensor();
      continue;
    }
    const FlatGroupInfo& info = map_.groups[g];  // whole groups: per-parameter views
    for (std::size_t i = 0; i < master_views_[g].size(); ++i)
      master_views_[g][i].mutable_grad() =
          attach ? grads32[g].narrow(0, info.params[i].offset, info.params[i].numel).view(master_views_[g][i].sizes())
                 : torch::Tensor();
  }
}

void ZeroEngine::write_back_masters() {
  // Rounded to nearest even by the conversion (or copied to the parameters' device). Masters in the swap file
  // were copied by the optimizer, one sub-group at a time.
  for (std::size_t g = 0; g < masters_.size() && !masters_.swapped(); ++g)
    if (flat_.flat[g].numel() > 0) own_flat_params(g).copy_(masters_.tensor(g));
}

}  // namespace hftrain
