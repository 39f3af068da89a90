// How a job's ranks divide into sequence-parallel groups and data-parallel replicas (distributed.sequence_parallel_size,
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
};

// The layout of `world` for groups of `sequence_parallel_size` ranks; the members of each group build its
// communicator together (Comm::subgroup, named sequence_parallel_<group>), once. ConfigError naming both numbers
// when the world size is not a multiple of the size.
ParallelLayout make_parallel_layout(Comm& world, int64_t sequence_parallel_size);

}  // namespace hftrain
