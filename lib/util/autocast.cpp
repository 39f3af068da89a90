// AutocastScope over LibTorch's CPU and CUDA autocast states (see autocast.h). Both are turned on
// together: each op is cast by the autocast of its tensors' device, so one scope serves a worker on
// either (a thread-local flag costs nothing where no CUDA tensor exists).
#include "util/autocast.h"

#include <ATen/autocast_mode.h>

namespace hftrain {
namespace {

// LibTorch 2.4 replaced the per-device calls (is_cpu_enabled, set_autocast_gpu_dtype, ...) by calls taking
// the device type; 2.x warns on every call of the old ones.
bool autocast_enabled(at::DeviceType type) {
#if HFTRAIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == at::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

torch::ScalarType autocast_dtype(at::DeviceType type) {
#if HFTRAIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(type);
#else
  return type == at::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_autocast(at::DeviceType type, bool enabled, torch::ScalarType dtype) {
#if HFTRAIN_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(type, enabled);
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == at::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

}  // namespace

AutocastScope::AutocastScope(torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return;
  active_ = true;
  prev_enabled_ = autocast_enabled(at::kCPU);
  prev_dtype_ = autocast_dtype(at::kCPU);
  prev_gpu_enabled_ = autocast_enabled(at::kCUDA);
  prev_gpu_dtype_ = autocast_dtype(at::kCUDA);
  set_autocast(at::kCPU, true, dtype);
  set_autocast(at::kCUDA, true, dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(at::kCPU, prev_enabled_, prev_dtype_);
  set_autocast(at::kCUDA, prev_gpu_enabled_, prev_gpu_dtype_);
}

torch::ScalarType current_autocast_dtype() {
  return autocast_enabled(at::kCPU) ? autocast_dtype(at::kCPU) : torch::kFloat;
}

}  // namespace hftrain
