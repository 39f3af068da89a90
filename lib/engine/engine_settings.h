// EngineSettings: everything an engine is built with, in one struct from the run spec to the ZeRO engine
// (engine/engine_builder.h fills it in ordered steps; engine/factory.h adds the frozen parameters and hands
// it to the engine). A setting that is a spec option takes its default from the spec's schema
// (runspec/sections.h), where it is declared once; the others are the engine's own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/flat_parameters.h"
#include "engine/frozen_partition.h"
#include "engine/param_coordinator.h"
#include "engine/precision.h"
#include "offload/swapped_optimizer.h"
#include "optim/optimizer.h"
#include "runspec/sections.h"

namespace hftrain {

// The spec's defaults of the sections the engine reads (a default-constructed section holds them).
inline const ZeroArgs& zero_defaults() {
  static const ZeroArgs defaults;
  return defaults;
}

struct EngineSettings {
  torch::Device device = torch::kCPU;  // the parameters' device: flat buffers, gradients and masters live there
  int stage = static_cast<int>(zero_defaults().stage);
  double max_grad_norm = 0;  // 0 = no clipping; a run gives training.max_grad_norm
  double bucket_cap_mb = DistributedArgs().ddp_bucket_cap_mb;
  std::string optimizer_type;        // the registry name, for messages
  OptimizerTraits optimizer_traits;  // what that optimizer can do (its registry entry's)
  bool skip_nonfinite_steps = false;  // skip the update when the global gradient norm is inf/nan
  bool report_memory = true;          // rank 0 prints every rank's memory and traffic after the first step
  MixedPrecision precision;           // fp32 by default; 16-bit parameters and gradients with fp32 masters
  // Stage 3: the trainable parameter names each gather unit of the model uses (resolve_gather_units),
  // the size under which a parameter stays whole on every rank, and the coordinator's budgets.
  std::vector<std::vector<std::string>> gather_units;
  int64_t persistence_threshold = zero_defaults().stage3_param_persistence_threshold;
  CoordinatorLimits gather_limits{zero_defaults().stage3_prefetch_bucket_size, zero_defaults().stage3_max_live_parameters};
  bool gather_16bit_weights_on_model_save = zero_defaults().stage3_gather_16bit_weights_on_model_save;
  // The parameters the run does not train (an adapter's base; make_engine fills it from the model), and at
  // stage 3 the names of those each gather unit uses: stage 3 partitions them (engine/frozen_partition.h);
  // stages 0-2 leave them whole in the model.
  NamedTensorList frozen;
  std::vector<std::vector<std::string>> frozen_gather_units;
  // Frozen tensors the model reads that are not parameters: a quantised base's block or row scales
  // (models/quantize_model.h quantized_storage; its codes are parameters). make_engine adds them to `frozen`, so
  // stage 3 partitions them per gather unit and dtype with the parameters and the memory report counts them.
  NamedTensorList frozen_storage;
  // zero.offload_optimizer device nvme (stages 1-3): the optimizer state -- with mixed precision the fp32
  // master weights too -- in swap files under nvme_offload->swap_dir (the engine adds this rank's
  // subdirectory). With nvme_offload->parameter_shards (zero.offload_param nvme, stage 3) the parameter
  // shards as well: each gather reads this rank's shard from the file.
  std::optional<SwapOptions> nvme_offload;
  // zero.offload_optimizer device cpu (stages 1-3): the fp32 masters of this rank's partition, the optimizer state
  // and an fp32 copy of the partition's gradients live in host memory (pinned beside a CUDA device); each step
  // copies the clipped gradients there, updates on the host and copies the new values back to the parameters'
  // device, as DeepSpeed's ZeRO-Offload does. The builder sets it only for parameters off the host (on the CPU
  // it would only copy); the engine honours it on any device.
  bool offload_to_host = false;
  // Stage 3, sharded construction (zero.Init): the model's parameters hold no memory yet; this hands
  // the engine each parameter's initial value in turn (Model::materialise_parameters, or the pretrained
  // files) and the engine reads only this rank's partition of each, so no rank holds the whole model.
  InitialValues initial_values;
  // Expert data parallelism (distributed.expert_parallel_size at stages 1-2; docs/distributed.md "Expert
  // parallelism"): the routed experts member j runs live in flat groups of their own, held only by the ranks with
  // member index j (every expert_parallel_size-th rank from j), partitioned over them and reduced over
  // `expert_data_group` (this rank's); `member_of` names the member of a parameter (-1: every rank holds it). Null
  // group: every flat group is held by every rank.
  std::shared_ptr<Comm> expert_data_group;
  int64_t expert_parallel_size = 1;
  std::function<int64_t(const std::string&)> member_of;
};

}  // namespace hftrain
