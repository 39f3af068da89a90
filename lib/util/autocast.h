// The forward passes of mixed-precision runs execute under LibTorch's autocast (a thread-local
// dispatcher mode, for CPU and CUDA tensors alike): AutocastScope turns it on for one dtype and restores the previous state on exit;
// current_autocast_dtype() lets code that recomputes a forward later (activation checkpointing) run it
// under the same mode.
#pragma once

#include "util/torch_compat.h"

namespace hftrain {

// Autocast with `dtype` in this scope (nothing for float32). Its cast cache is cleared when the
// outermost scope ends, as torch.autocast does.
class AutocastScope {
 public:
  explicit AutocastScope(torch::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool prev_enabled_ = false;
  torch::ScalarType prev_dtype_ = torch::kBFloat16;
  bool prev_gpu_enabled_ = false;
  torch::ScalarType prev_gpu_dtype_ = torch::kHalf;
};

// The dtype autocast runs with on this thread now; kFloat when it is off.
torch::ScalarType current_autocast_dtype();

}  // namespace hftrain
