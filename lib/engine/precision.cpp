// Precision names and the run's precision policy (see precision.h).
#include "engine/precision.h"

#include "runspec/run_spec.h"

namespace hftrain {
namespace {

torch::ScalarType dtype_named(const std::string& name) {
  return name == "bf16" ? torch::kBFloat16 : name == "fp16" ? torch::kHalf : torch::kFloat;
}

}  // namespace

PrecisionPolicy precision_policy(const RunSpec& spec) {
  PrecisionPolicy policy;
  MixedPrecision& m = policy.training;
  const PrecisionArgs& p = spec.precision;
  if (p.bf16) m.param_dtype = torch::kBFloat16;
  if (p.fp16) m.param_dtype = torch::kHalf;
  m.reduce_dtype = spec.zero.reduce_dtype == "fp32" ? torch::kFloat : m.param_dtype;
  if (p.fp16) {
    m.scaler.dynamic = p.loss_scale == 0;
    m.scaler.static_scale = p.loss_scale > 0 ? p.loss_scale : 1.0;
    m.scaler.initial_scale_power = p.initial_scale_power;
    m.scaler.scale_window = p.loss_scale_window;
    m.scaler.hysteresis = p.hysteresis;
    m.scaler.consecutive_hysteresis = p.consecutive_hysteresis;
    m.scaler.min_scale = p.min_loss_scale;
  }
  policy.saved_dtype = dtype_named(p.save_dtype);
  if (spec.training.bf16_full_eval) policy.full_eval_dtype = torch::kBFloat16;
  else if (spec.training.fp16_full_eval) policy.full_eval_dtype = torch::kHalf;
  return policy;
}

std::string precision_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return "bf16";
    case torch::kHalf: return "fp16";
    case torch::kFloat: return "fp32";
    default: return c10::toString(dtype);
  }
}

int64_t dtype_bytes(torch::ScalarType dtype) { return static_cast<int64_t>(c10::elementSize(dtype)); }

}  // namespace hftrain
