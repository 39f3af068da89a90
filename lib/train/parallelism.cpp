// A run's parallelisms in order (see parallelism.h).
#include "train/parallelism.h"

#include <functional>
#include <utility>
#include <vector>

#include "log/logger.h"
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

const std::vector<std::pair<const char*, ParallelismStep>>& parallelism_steps() {
  static const std::vector<std::pair<const char*, ParallelismStep>> steps = {
      {"sequence-parallel groups", sequence_parallel_groups},
      {"sequence-parallel attention", sequence_parallel_attention},
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
