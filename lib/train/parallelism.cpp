// A run's parallelisms in order (see parallelism.h).
#include "train/parallelism.h"

#include <functional>
#include <utility>
#include <vector>

#include "log/logger.h"
#include "models/expert_parallel.h"
#include "models/sequence_parallel.h"

namespace hftrain {
namespace {

using ParallelismStep = std::function<void(const RunSpec&, Model&, Comm&, ParallelLayout&)>;

// Consecutive ranks share each sequence; the groups are the data-parallel replicas.
void sequence_parallel_groups(const RunSpec& spec, Model&, Comm& world, ParallelLayout& layout) {
  layout = make_parallel_layout(world, spec.distributed.sequence_parallel_size);
  if (layout.sequence_parallel_size > 1 && world.rank() == 0)
    log_info("sequence parallel: " + std::to_string(layout.data_parallel_size) + " data-parallel group(s) of " +
             std::to_string(layout.sequence_parallel_size) + " consecutive ranks, each rank holding a slice of every "
             "sequence (world " + std::to_string(world.world_size()) + " = " + std::to_string(layout.data_parallel_size) +
             " x " + std::to_string(layout.sequence_parallel_size) + ")");
}

// Ulysses: the model's attention exchanges the slices over the group (the model refuses what it cannot).
void sequence_parallel_attention(const RunSpec&, Model& model, Comm&, ParallelLayout& layout) {
  if (layout.sequence_group) model.set_sequence_parallel(std::make_shared<SequenceParallel>(layout.sequence_group));
}

// Consecutive ranks share the routed experts; every rank still reads its own batches.
void expert_parallel_groups(const RunSpec& spec, Model&, Comm& world, ParallelLayout& layout) {
  add_expert_groups(layout, world, spec.distributed.expert_parallel_size);
  if (layout.expert_group && world.rank() == 0)
    log_info("expert parallel: groups of " + std::to_string(layout.expert_parallel_size) + " consecutive ranks share the "
             "routed experts, each running its share of every routed layer for the group's tokens in training");
}

// The model's routed blocks send each token to the member running its experts (the model refuses what it cannot).
void expert_parallel_experts(const RunSpec&, Model& model, Comm&, ParallelLayout& layout) {
  if (layout.expert_group) model.set_expert_parallel(std::make_shared<ExpertParallel>(layout.expert_group));
}

const std::vector<std::pair<const char*, ParallelismStep>>& parallelism_steps() {
  static const std::vector<std::pair<const char*, ParallelismStep>> steps = {
      {"sequence-parallel groups", sequence_parallel_groups},
      {"sequence-parallel attention", sequence_parallel_attention},
      {"expert-parallel groups", expert_parallel_groups},
      {"expert-parallel experts", expert_parallel_experts},
  };
  return steps;
}

}  // namespace

ParallelLayout apply_parallelism(const RunSpec& spec, Model& model, Comm& world) {
  ParallelLayout layout;
  for (const auto& [name, step] : parallelism_steps()) step(spec, model, world, layout);
  return layout;
}

}  // namespace hftrain
