// Mixed precision: which dtype the model's parameters, gradients and forward run in, the dtype
// gradients are reduced in, and the loss scaler (engine/loss_scaler.h). fp32 master weights and the
// optimizer state stay in float32 inside the engine's partition (ZeRO paper §3: 2 + 2 + 12 bytes per
// parameter). The forward runs under LibTorch's autocast with the 16-bit dtype, so autocast's op lists
// decide which ops run in 16-bit (matmuls, linear) and which in float32.
#pragma once

#include <string>

#include "engine/loss_scaler.h"
#include "util/autocast.h"

namespace hftrain {

struct MixedPrecision {
  torch::ScalarType param_dtype = torch::kFloat;   // model parameters and gradients
  torch::ScalarType reduce_dtype = torch::kFloat;  // gradient reductions (zero.reduce_dtype)
  LossScalerConfig scaler;                         // fp16: dynamic or static; otherwise a static 1

  bool enabled() const { return param_dtype != torch::kFloat; }
};

// "fp32", "bf16", "fp16" (the names the run spec uses).
std::string precision_name(torch::ScalarType dtype);
// Bytes of one element of `dtype`.
int64_t dtype_bytes(torch::ScalarType dtype);

}  // namespace hftrain
