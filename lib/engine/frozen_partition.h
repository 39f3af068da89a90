// FrozenPartition: ZeRO-3 for the parameters a run does not train (an adapter's frozen base). They are
// partitioned and gathered like the trainable ones -- one flat buffer per gather unit and dtype, each rank
// keeping its 1/world shard, the model's parameters views of a buffer that holds memory only while a unit
// that uses it runs (engine/param_coordinator.h) -- but they are never reduced, stepped or saved: no
// gradients, no masters, no optimizer state, no checkpoint copies. DeepSpeed's stage 3 partitions frozen
// parameters the same way (they are ordinary ZeRO parameters that get no gradient).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

using NamedTensorList = std::vector<std::pair<std::string, torch::Tensor>>;

struct FrozenGroups {
  std::vector<torch::Tensor> full;   // per group, the whole padded buffer (released by the coordinator)
  std::vector<torch::Tensor> shard;  // per group, this rank's part: the all-gather's source
  std::vector<std::vector<std::size_t>> unit_groups;  // per gather unit, the groups it uses
  int64_t partitioned_elements = 0;  // frozen elements in the groups (without padding)
  int64_t whole_elements = 0;        // frozen elements left whole (under the persistence threshold)

  int64_t shard_bytes() const;
};

// `units[u]`: the frozen parameters gather unit u uses (a tensor used by several units appears in each).
// A parameter under `persistence_threshold` elements stays whole in the model, as a trainable one does;
// the others move into flat buffers: per unit and dtype for those one unit uses, per dtype for those
// several units share. Every rank must hold the same values (the base is loaded or seeded alike).
FrozenGroups partition_frozen(const std::vector<NamedTensorList>& units, int64_t persistence_threshold, int rank, int world);

}  // namespace hftrain
