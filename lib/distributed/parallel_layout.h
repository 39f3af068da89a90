// How a job's ranks divide into sequence-parallel groups, data-parallel replicas and expert-parallel groups (distributed.sequence_parallel_size,
// docs/distributed.md): consecutive ranks form a group (rank r is in group r / sp and holds slice r % sp of each
// sequence); the groups are the data-parallel replicas, each reading its own batches (world = dp x sp). ZeRO still
// partitions over every rank of the world.
#pragma once

#include <memory>

#include "distributed/comm.h"

namespace hftrain {

struct ParallelLayout {
  int64_t sequence_parallel_size = 1;  // ranks per group
  int64_t sequence_rank = 0;           // this rank's slice of each sequence
  int64_t data_parallel_size = 1;      // groups: the replicas that read different batches
  int64_t data_parallel_rank = 0;      // this rank's group
  std::shared_ptr<Comm> sequence_group;  // the group's communicator; null when sequence_parallel_size is 1
  // Expert parallelism: consecutive ranks share the routed experts (rank r is member r % ep of group r / ep); data
  // stays parallel over every rank.
  int64_t expert_parallel_size = 1;
  std::shared_ptr<Comm> expert_group;  // null when expert_parallel_size is 1
  // The expert-data-parallel group: the ranks with this rank's member index (r % ep), which hold the same experts
  // when the engine shards them (DeepSpeed-MoE's expert data parallelism); null when expert_parallel_size is 1.
  std::shared_ptr<Comm> expert_data_group;
};

// The layout of `world` for groups of `sequence_parallel_size` ranks; the members of each group build its
// communicator together (Comm::subgroup, named sequence_parallel_<group>), once. ConfigError naming both numbers
// when the world size is not a multiple of the size.
ParallelLayout make_parallel_layout(Comm& world, int64_t sequence_parallel_size);

// `layout` with the expert-parallel groups of `expert_parallel_size` consecutive ranks (Comm::subgroup, named
// expert_parallel_<group>) and the expert-data-parallel groups of the ranks with the same member index
// (expert_data_parallel_<member>, every ep-th rank). ConfigError naming both numbers when the world size is not a multiple of the size.
void add_expert_groups(ParallelLayout& layout, Comm& world, int64_t expert_parallel_size);

}  // namespace hftrain
