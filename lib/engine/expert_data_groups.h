// Expert data parallelism's flat groups (docs/distributed.md "Expert parallelism"): with expert groups of P ranks,
// member j's routed experts are trained only on the ranks with member index j (j, j + P, j + 2P, ...), as
// DeepSpeed-MoE's expert-data-parallel groups. Each optimizer group is split into the parameters every rank holds
// and one group per member for its experts, held by that member's ranks (PartitionMap's group ranks), so the
// partition map stays one map, the same on every rank (universal checkpoints).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace hftrain {

struct HeldGroups {
  std::vector<ParamGroup> groups;
  std::vector<std::vector<int>> holders;  // per group, the ranks that hold it (empty: every rank)
};

// `groups` split by `member_of` (a parameter's member, -1 for every rank): per input group, first its parameters
// every rank holds (kept even when empty), then one group per member with experts in it.
HeldGroups split_expert_groups(const std::vector<ParamGroup>& groups, const std::function<int64_t(const std::string&)>& member_of,
                               int64_t expert_parallel_size, int world_size);

}  // namespace hftrain
