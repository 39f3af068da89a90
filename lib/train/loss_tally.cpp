// The training loss's sums, kept on the losses' device (see loss_tally.h); added to in place, so a step allocates
// only the micro-batch's float64 copy and the filter's stand-in.
#include "train/loss_tally.h"

namespace hftrain {
namespace {

torch::Tensor scalar_on(double value, const torch::Device& device) {
  return torch::scalar_tensor(value, torch::TensorOptions().dtype(torch::kDouble).device(device));
}

double read(const torch::Tensor& t) { return t.defined() ? t.item<double>() : 0.0; }

}  // namespace

void LossTally::place_on(const torch::Device& device) {
  if (!since_log_.defined()) {
    step_ = scalar_on(0.0, device), since_log_ = scalar_on(0.0, device), total_ = scalar_on(0.0, device);
  } else if (since_log_.device() != device) {
    step_ = step_.to(device), since_log_ = since_log_.to(device), total_ = total_.to(device);
  }
}

void LossTally::add_micro_batch(const torch::Tensor& loss, int64_t steps_since_log) {
  place_on(loss.device());
  torch::Tensor value = loss.detach().to(torch::kDouble);
  if (nan_inf_filter_) {
    // The divisor as a 0-dim tensor on the device, not a host scalar: CUDA would multiply by its reciprocal.
    const torch::Tensor stand_in = (since_log_ + step_) / scalar_on(static_cast<double>(1 + steps_since_log), loss.device());
    value = torch::where(torch::isfinite(value), value, stand_in);
  }
  step_.add_(value);
}

void LossTally::end_step() {
  if (!step_.defined()) return;
  since_log_.add_(step_);
  total_.add_(step_);
  step_.zero_();
}

double LossTally::since_log() const { return read(since_log_); }

double LossTally::total() const { return read(total_); }

void LossTally::clear_since_log() {
  if (since_log_.defined()) since_log_.zero_();
}

void LossTally::restore(double since_log, double total) {
  const torch::Device device = since_log_.defined() ? since_log_.device() : torch::Device(torch::kCPU);
  step_ = scalar_on(0.0, device), since_log_ = scalar_on(since_log, device), total_ = scalar_on(total, device);
}

}  // namespace hftrain
