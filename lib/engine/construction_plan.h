// How a run's model is built for its engine, decided from the spec in one place (ZeRO-3's zero.Init):
// whether the model is built without holding its parameters (each rank later keeps only its partition,
// read from the model's initialisation or the pretrained files), whether its parameters end up partitioned
// (every forward then gathers collectively), and the engine settings a device cannot run. train/ asks this
// plan and names no ZeRO stage.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/model_io.h"
#include "models/model.h"
#include "runspec/run_spec.h"

namespace hftrain {

struct ConstructionPlan {
  // Build under DeferredInit (zero.Init: stage 3 with zero.zero3_init_flag, training, no adapter, and weights
  // that can be read rank by rank: none or an HF model directory).
  bool deferred = false;
  // zero.Init was asked for; a model family that cannot defer is built whole and partitioned after.
  bool sharded_init = false;
  // The engine partitions the parameters (stage 3) or holds the experts on their members' ranks only (expert data
  // parallelism): the ranks must run the same forwards.
  bool parameters_sharded = false;
  // Training at stage 3: adapters and their frozen base are partitioned too (said once adapters attach).
  bool partitions_adapters = false;
};

// Logs what it decided against the spec's wish (an adapter run builds its base whole).
ConstructionPlan plan_construction(const RunSpec& spec, bool for_training);

// Whether training holds each member's routed experts on its expert-data-parallel ranks only (DeepSpeed-MoE's
// expert data parallelism): distributed.expert_parallel_size above 1 at zero.stage 1 or 2, the experts trained
// (not an adapter run, whose frozen base stays whole). Stage 3 already partitions them over every rank.
bool holds_experts_apart(const RunSpec& spec, int64_t stage);
inline bool holds_experts_apart(const RunSpec& spec) { return holds_experts_apart(spec, spec.zero.stage); }

// After the model is built under `plan`: a model built without its parameters gets its buffers from the
// pretrained files and returns the plan the engine reads each rank's partition from (null for a model
// initialised here); a model built whole returns null. Logs which of these happened.
std::shared_ptr<const PretrainedPlan> deferred_weights(const ConstructionPlan& plan, const RunSpec& spec, Model& model);

// Logs, at stage 3, that the adapters just attached are partitioned with their base.
void note_adapters(const ConstructionPlan& plan);

// ConfigError for the engine's settings that `device` cannot run (fp16 off a GPU, NVMe or parameter offload
// beside parameters on a GPU).
void check_engine_device(const RunSpec& spec, torch::Device device);

}  // namespace hftrain
