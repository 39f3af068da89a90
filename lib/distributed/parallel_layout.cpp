// The sequence-parallel groups, data-parallel replicas and expert-parallel groups of a job (see parallel_layout.h).
#include "distributed/parallel_layout.h"

#include <vector>

#include "util/error.h"

namespace hftrain {

ParallelLayout make_parallel_layout(Comm& world, int64_t sequence_parallel_size) {
  const int64_t sp = sequence_parallel_size, n = world.world_size(), rank = world.rank();
  if (sp < 1 || n % sp != 0)
    throw ConfigError("distributed.sequence_parallel_size: " + std::to_string(sp) + " must divide the world size " +
                      std::to_string(n) + " (workers in all): groups of that many ranks share each sequence");
  ParallelLayout layout;
  layout.sequence_parallel_size = sp;
  layout.sequence_rank = rank % sp;
  layout.data_parallel_size = n / sp;
  layout.data_parallel_rank = rank / sp;
  if (sp == 1) return layout;
  std::vector<int> members;
  for (int64_t r = layout.data_parallel_rank * sp; r < (layout.data_parallel_rank + 1) * sp; ++r)
    members.push_back(static_cast<int>(r));
  layout.sequence_group = world.subgroup(members, "sequence_parallel_" + std::to_string(layout.data_parallel_rank));
  return layout;
}

void add_expert_groups(ParallelLayout& layout, Comm& world, int64_t expert_parallel_size) {
  const int64_t ep = expert_parallel_size, n = world.world_size();
  if (ep < 1 || n % ep != 0)
    throw ConfigError("distributed.expert_parallel_size: " + std::to_string(ep) + " must divide the world size " +
                      std::to_string(n) + " (workers in all): groups of that many ranks share the experts");
  layout.expert_parallel_size = ep;
  if (ep == 1) return;
  const int64_t group = world.rank() / ep;
  std::vector<int> members;
  for (int64_t r = group * ep; r < (group + 1) * ep; ++r) members.push_back(static_cast<int>(r));
  layout.expert_group = world.subgroup(members, "expert_parallel_" + std::to_string(group));
  const int64_t member = world.rank() % ep;
  std::vector<int> holders;
  for (int64_t r = member; r < n; r += ep) holders.push_back(static_cast<int>(r));
  layout.expert_data_group = world.subgroup(holders, "expert_data_parallel_" + std::to_string(member));
}

}  // namespace hftrain
