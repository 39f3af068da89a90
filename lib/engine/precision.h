// Mixed precision: which dtype the model's parameters, gradients and forward run in, the dtype
// gradients are reduced in, and the loss scaler (engine/loss_scaler.h). fp32 master weights and the
// optimizer state stay in float32 inside the engine's partition (ZeRO paper §3: 2 + 2 + 12 bytes per
// parameter). The forward runs under LibTorch's autocast with the 16-bit dtype, so autocast's op lists
// decide which ops run in 16-bit (matmuls, linear) and which in float32. `PrecisionPolicy` is what a run's
// precision settings mean, decided once from its spec: the trainer and the commands ask it for dtypes.
#pragma once

#include <string>

#include "engine/loss_scaler.h"
#include "util/autocast.h"

namespace hftrain {

struct RunSpec;

struct MixedPrecision {
  torch::ScalarType param_dtype = torch::kFloat;   // model parameters and gradients
  torch::ScalarType reduce_dtype = torch::kFloat;  // gradient reductions (zero.reduce_dtype)
  LossScalerConfig scaler;                         // fp16: dynamic or static; otherwise a static 1

  bool enabled() const { return param_dtype != torch::kFloat; }
};

// precision.bf16 / fp16 (HF --bf16 / --fp16, DeepSpeed's bf16 / fp16 sections), precision.save_dtype,
// zero.reduce_dtype (DeepSpeed communication_data_type) and HF's bf16_full_eval / fp16_full_eval, read once.
struct PrecisionPolicy {
  MixedPrecision training;  // the engine's: 16-bit parameters and gradients with fp32 masters, or fp32
  torch::ScalarType saved_dtype = torch::kFloat;  // the final model.safetensors (checkpoints keep fp32: exact resume)
  // eval / predict outside training: the model itself in this dtype (training.*_full_eval), kFloat = fp32 weights.
  torch::ScalarType full_eval_dtype = torch::kFloat;

  // Training forwards autocast to this dtype; kFloat = plain fp32.
  torch::ScalarType compute_dtype() const { return training.param_dtype; }
};

PrecisionPolicy precision_policy(const RunSpec& spec);

// "fp32", "bf16", "fp16" (the names the run spec uses).
std::string precision_name(torch::ScalarType dtype);
// Bytes of one element of `dtype`.
int64_t dtype_bytes(torch::ScalarType dtype);

}  // namespace hftrain
