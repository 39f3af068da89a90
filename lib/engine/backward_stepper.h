// Runs a layer-wise optimizer (Optimizer::steps_in_backward) inside backward. A hook on every parameter it
// steps receives the parameter's complete gradient (autograd calls a leaf's hook once, after every use of
// the parameter has contributed), hands it to Optimizer::step_parameter at the step's learning rate, and
// adds its square norm to the step's gradient norm. The gradient that autograd then stores in .grad is
// released at the next hook and after backward, so at most one parameter's gradient is alive beyond the
// one being applied: whole-model gradients never exist (LibTorch 1.13 has no post-accumulate hook, hence
// the release at the next hook). Needs gradient accumulation 1 (the trainer refuses more). Clipping (LOMO's
// scheme, lomo / adalomo): a first backward pass only measures the global norm, the second applies the
// updates with every gradient times the clip coefficient.
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "util/device_scalar.h"

namespace hftrain {

class BackwardStepper {
 public:
  explicit BackwardStepper(Optimizer& optimizer);
  ~BackwardStepper();
  BackwardStepper(const BackwardStepper&) = delete;
  BackwardStepper& operator=(const BackwardStepper&) = delete;
  // Before the step's backward: its learning rate.
  void begin(double lr);
  // Clipping: the next backward only measures the norm; then update_pass(max_norm) fixes the coefficient
  // min(1, max_norm / (norm + 1e-6)) (torch's clip_grad_norm_ arithmetic) for the backward that updates.
  void measure_pass();
  void update_pass(double max_norm);
  // After backward: releases the last gradient; returns the step's global L2 gradient norm.
  DeviceScalar finish();
  // The most gradient bytes alive at once during a backward so far (the one being applied included), and
  // the bytes of all the gradients together.
  int64_t peak_grad_bytes() const { return peak_bytes_; }
  int64_t all_grad_bytes() const { return all_bytes_; }

 private:
  void on_gradient(std::size_t index, const torch::Tensor& grad);
  void release_held();
  struct Entry {
    std::string name;
    torch::Tensor param;
    unsigned hook = 0;
  };
  Optimizer& optimizer_;
  std::vector<Entry> entries_;
  std::vector<std::size_t> held_;  // entries whose .grad autograd may have stored
  double lr_ = 0;
  torch::Tensor norm_sq_;  // double, 0-dim, on the gradients' device; undefined before the first gradient
  bool measure_only_ = false, measured_ = false;
  torch::Tensor coef_;  // clip coefficient (float32, 0-dim, torch's rounding), undefined when not clipping
  int64_t peak_bytes_ = 0, all_bytes_ = 0;
};

}  // namespace hftrain
