// The ZeroEngine's update rule (see zero_engine.h): the global gradient norm over what every rank holds,
// clipping (torch 1.13 rounding), the overflow verdict and loss scale of mixed precision, the optimizer
// step on this rank's masters, and sharing the updated parameters with the other ranks.
#include <cmath>
#include <limits>

#include "engine/zero_engine.h"
#include "util/fault_injection.h"

namespace hftrain {
namespace {

int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// Σ (‖part‖₂ / divisor)² over `parts`, each part's norm in float32 and the squares added in order in double,
// as the host would add them, but on the parts' device and read back once: on a GPU a read per part would
// wait for the device that many times a step (a 124M-parameter model has ~120 chunks of 2^20).
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
  double read() const { return sum_.defined() ? sum_.item<double>() : 0.0; }

 private:
  double divisor_;
  torch::Tensor sum_;
};

}  // namespace

StepResult ZeroEngine::step_fp32(double lr) {
  StepResult r;
  if (!shards_optimizer_) {
    // Every rank holds the same averaged gradients: the same norm and verdict everywhere.
    std::vector<torch::Tensor> all;
    for (const auto& g : flat_.params) all.insert(all.end(), g.begin(), g.end());
    const bool finite_check = options_.skip_nonfinite_steps;
    r.grad_norm = clip_grad_norm(all, finite_check ? 0.0 : options_.max_grad_norm);
    if (finite_check) {
      if (!std::isfinite(r.grad_norm)) r.skipped = true;
      else if (options_.max_grad_norm > 0) clip_grad_norm(all, options_.max_grad_norm);
    }
    if (!r.skipped) optimizer_->step(lr);
    return r;
  }
  // Global norm over the partitions: every rank adds its squared partition norm. Padding is zero.
  SquaredNormSum local_sum(1.0);
  for (const auto& g : grads_->step_grads())
    if (g.numel() > 0) local_sum.add(g);
  const double local = local_sum.read();
  const double total_sq = comm_.all_reduce_scalar(local, ReduceOp::kSum, "gradient norm");
  auto total = torch::tensor(static_cast<float>(std::sqrt(total_sq)), torch::kFloat32);
  r.grad_norm = total.item<double>();
  if (options_.skip_nonfinite_steps && !std::isfinite(r.grad_norm)) {
    r.skipped = true;
    return r;
  }
  if (options_.max_grad_norm > 0) {
    const double coef = clip_coefficient(total, options_.max_grad_norm).item<double>();  // a float32 value
    for (const auto& g : grads_->step_grads()) torch::Tensor(g).mul_(coef);
  }
  if (host_masters_) {
    step_on_host(lr, grads_->step_grads());
    return r;
  }
  optimizer_->step(lr);
  share_updated_parameters();
  return r;
}

void ZeroEngine::step_on_host(double lr, const std::vector<torch::Tensor>& clipped_grads) {
  for (std::size_t g = 0; g < clipped_grads.size(); ++g)
    if (host_grads_[g].data_ptr() != clipped_grads[g].data_ptr()) host_grads_[g].copy_(clipped_grads[g]);
  set_master_grads(host_grads_);
  optimizer_->step(lr);
  set_master_grads({});
  write_back_masters();  // the new values to the parameters' device, then shared
}

StepResult ZeroEngine::step_mixed(double lr) {
  StepResult r;
  // The 16-bit gradients this rank updates (whole groups at stage 0, the partition at 1-3). An optimizer that
  // fuses the 16-bit side reads them directly, unscaled and clipped by the factor it is given, and writes the
  // 16-bit parameters in the same pass; otherwise (Adafactor) fp32 copies divided by the loss scale are
  // attached to the masters and the masters are copied back after the step.
  const double scale = scaler_.scale();
  // With host offload the fp32 copies are the host gradient buffers: the norm, clipping and update run there.
  const bool fused = !host_masters_ && optimizer_->fuses_low_precision();
  std::vector<torch::Tensor> grads16 = grads_->step_grads(), grads32;
  int64_t grad32_bytes = 0;
  for (std::size_t g = 0; g < grads16.size() && !fused; ++g) {
    auto g32 = host_masters_ ? host_grads_[g].copy_(grads16[g]) : grads16[g].to(torch::kFloat);
    if (scale != 1.0) g32.mul_(1.0 / scale);
    grad32_bytes += host_masters_ ? 0 : tensor_bytes(g32);
    grads32.push_back(g32);
  }
  grads_->note_transient(grad32_bytes);
  auto& checked = fused ? grads16 : grads32;
  if (fault::forced_overflow() && rank_ == 0 && !checked.empty() && checked[0].numel() > 0)
    checked[0][0] = std::numeric_limits<float>::infinity();  // test hook: this rank's gradients overflow

  // Norm over what this rank holds; sharded stages add the partitions of every rank (a non-finite partition
  // makes the sum non-finite everywhere), stage 0 votes on the verdict so that every rank agrees.
  SquaredNormSum local_sum(fused ? scale : 1.0);  // fused: 16-bit gradients still multiplied by the loss scale
  for (const auto& g : checked) {
    if (g.numel() == 0) continue;
    if (!fused) {
      local_sum.add(g);
      continue;
    }
    // 16-bit gradients: the norm in fp32, a chunk at a time (no full fp32 copy).
    const int64_t chunk = int64_t{1} << 20;
    for (int64_t begin = 0; begin < g.numel(); begin += chunk) local_sum.add(g.narrow(0, begin, std::min(chunk, g.numel() - begin)));
  }
  const double local = local_sum.read();
  double total_sq = local;
  bool overflow = !std::isfinite(local);
  if (world_ > 1) {
    if (shards_optimizer_) {
      total_sq = comm_.all_reduce_scalar(local, ReduceOp::kSum, "gradient norm");
      overflow = !std::isfinite(total_sq);
    } else {
      overflow = comm_.all_reduce_scalar(overflow ? 1.0 : 0.0, ReduceOp::kMax, "gradient overflow vote") > 0;
    }
  }
  auto total = torch::tensor(static_cast<float>(std::sqrt(total_sq)), torch::kFloat32);
  r.grad_norm = overflow && std::isfinite(total_sq) ? std::numeric_limits<double>::infinity() : total.item<double>();
  r.prev_loss_scale = scale;
  scaler_.update(overflow);
  if (scaler_.dynamic() || scale != 1.0) r.loss_scale = scaler_.scale();
  if (overflow) {
    r.skipped = true;
    return r;
  }
  double clip = 1.0;
  if (options_.max_grad_norm > 0) {
    clip = clip_coefficient(total, options_.max_grad_norm).item<double>();  // a float32 value
    for (auto& g : grads32) g.mul_(clip);
  }
  if (fused) {
    optimizer_->step(lr, StepScaling{clip / scale});
    share_updated_parameters();
    return r;
  }
  if (host_masters_) {
    step_on_host(lr, grads32);  // grads32 are the host buffers: nothing more to copy
    return r;
  }
  set_master_grads(grads32);
  optimizer_->step(lr);
  set_master_grads({});
  write_back_masters();
  return r;
}

void ZeroEngine::set_master_grads(const std::vector<torch::Tensor>& grads32) {
  const bool attach = !grads32.empty();
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    if (shards_optimizer_) {
      masters_.tensor(g).mutable_grad() = attach ? grads32[g] : torch::Tensor();
      continue;
    }
    const FlatGroupInfo& info = map_.groups[g];
    for (std::size_t i = 0; i < master_views_[g].size(); ++i)
      master_views_[g][i].mutable_grad() =
          attach ? grads32[g].narrow(0, info.params[i].offset, info.params[i].numel).view(master_views_[g][i].sizes())
                 : torch::Tensor();
  }
}

torch::Tensor ZeroEngine::own_flat_params(std::size_t g) const {
  if (partitions_params_) return shard16_[g];
  const FlatGroupInfo& info = map_.groups[g];
  return shards_optimizer_ ? flat_.flat[g].narrow(0, info.partition_begin(rank_), info.partition_size) : flat_.flat[g];
}

void ZeroEngine::write_back_masters() {
  // Rounded to nearest even by the conversion, then shared. Masters in the swap file were copied by the
  // optimizer, one sub-group at a time.
  for (std::size_t g = 0; g < masters_.size() && !masters_.swapped(); ++g)
    if (flat_.flat[g].numel() > 0) own_flat_params(g).copy_(masters_.tensor(g));
  share_updated_parameters();
}

void ZeroEngine::share_updated_parameters() {
  // Sharded stages all-gather the updated partitions into the full parameters (from the fp32 masters, which
  // are the partitions, or their 16-bit copies); partitioned parameters only refresh the groups kept whole.
  if (partitions_params_) {
    coordinator_->refresh_persistent();
    return;
  }
  if (!shards_optimizer_) return;
  for (std::size_t g = 0; g < masters_.size(); ++g)
    if (flat_.flat[g].numel() > 0)
      comm_.all_gather(params_copy_masters() ? own_flat_params(g) : masters_.tensor(g), flat_.flat[g],
                       "parameters of group " + std::to_string(g));
}

}  // namespace hftrain
