// The parallelisms of a run, applied in order as torchtitan applies its own, the model staying free of them: the
// sequence-parallel groups (distributed/parallel_layout), then the model's attention over them (Ulysses,
// models/sequence_parallel), then the expert-parallel groups and the model's routed experts over them
// (models/expert_parallel). The trainer then deals the data by the layout: each group one replica of the
// distributed sampler, each rank its slice of the group's batches (DataLoader::slice_sequences). Data parallelism
// over every rank of the world (ZeRO) is the engine's (engine/engine_builder).
#pragma once

#include "distributed/parallel_layout.h"
#include "models/model.h"
#include "runspec/run_spec.h"

namespace hftrain {

// The layout of distributed.sequence_parallel_size and expert_parallel_size over `world`, with `model` attending and
// routing over its groups. ConfigError when the world size is not a multiple of a size or the model cannot (its
// family, or heads / experts that do not divide).
ParallelLayout apply_parallelism(const RunSpec& spec, Model& model, Comm& world);

}  // namespace hftrain
