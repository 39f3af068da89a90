// Engine construction keyed by zero.stage: the single-process engine (stage 0, one worker, fp32) or the
// ZeRO engine (stages 0-3 over the world's ranks, and every mixed-precision run: it owns the 16-bit buffers
// and fp32 masters). Mixed precision also turns the frozen floating-point parameters into the 16-bit dtype
// here, so the whole model computes in it. engine/engine_builder.h fills EngineConfig from a run spec.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/comm.h"
#include "engine/zero_engine.h"

namespace hftrain {

struct EngineConfig {
  torch::Device device = torch::kCPU;  // the model's device: flat buffers, gradients, masters, optimizer state
  int stage = 0;
  double max_grad_norm = 0;
  double bucket_cap_mb = 25;
  std::string optimizer_type;        // the registry name, for messages
  OptimizerTraits optimizer_traits;  // what that optimizer can do (its registry entry's)
  MixedPrecision precision;    // fp32 by default
  // Stage 3: trainable parameter names per gather unit of the model, and the zero.stage3_* settings.
  std::vector<std::vector<std::string>> gather_units;
  std::vector<std::vector<std::string>> frozen_gather_units;  // the frozen parameters (an adapter's base) per unit
  int64_t persistence_threshold = 100000;
  CoordinatorLimits gather_limits;
  bool gather_16bit_weights_on_model_save = true;
  std::optional<SwapOptions> nvme_offload;  // zero.offload_optimizer device nvme
  bool offload_to_host = false;             // zero.offload_optimizer device cpu beside device parameters
  InitialValues initial_values;  // stage 3 sharded construction (zero.Init)
};

// `named_params` in the model's order (all of them; frozen ones are skipped), `groups` the optimizer
// parameter groups over the trainable ones.
std::unique_ptr<Engine> make_engine(const EngineConfig& config,
                                    const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
                                    std::vector<ParamGroup> groups, const OptimizerFactory& build_optimizer, Comm& comm);

}  // namespace hftrain
