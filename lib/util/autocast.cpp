// AutocastScope over LibTorch's CPU and CUDA autocast states (see autocast.h). Both are turned on
// together: each op is cast by the autocast of its tensors' device, so one scope serves a worker on
// either (a thread-local flag costs nothing where no CUDA tensor exists).
#include "util/autocast.h"

#include <ATen/autocast_mode.h>

namespace hftrain {

AutocastScope::AutocastScope(torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return;
  active_ = true;
  prev_enabled_ = at::autocast::is_cpu_enabled();
  prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
  prev_gpu_enabled_ = at::autocast::is_enabled();
  prev_gpu_dtype_ = at::autocast::get_autocast_gpu_dtype();
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(dtype);
  at::autocast::set_enabled(true);
  at::autocast::set_autocast_gpu_dtype(dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_cpu_enabled(prev_enabled_);
  at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  at::autocast::set_enabled(prev_gpu_enabled_);
  at::autocast::set_autocast_gpu_dtype(prev_gpu_dtype_);
}

torch::ScalarType current_autocast_dtype() {
  return at::autocast::is_cpu_enabled() ? at::autocast::get_autocast_cpu_dtype() : torch::kFloat;
}

}  // namespace hftrain
