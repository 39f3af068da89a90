// Optimizer groups split by the member that runs each routed expert (see expert_data_groups.h).
#include "engine/expert_data_groups.h"

#include "util/error.h"

namespace hftrain {

HeldGroups split_expert_groups(const std::vector<ParamGroup>& groups, const std::function<int64_t(const std::string&)>& member_of,
                               int64_t expert_parallel_size, int world_size) {
  const int64_t P = expert_parallel_size;
  if (P < 1 || world_size % P != 0)
    throw RuntimeFailure("expert data parallelism: expert_parallel_size " + std::to_string(P) + " does not divide the world size " +
                         std::to_string(world_size));
  HeldGroups out;
  for (const ParamGroup& group : groups) {
    std::vector<ParamGroup> parts(static_cast<std::size_t>(P + 1));  // [0]: every rank's; [1 + j]: member j's
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const int64_t member = member_of(group.names[i]);
      if (member < -1 || member >= P)
        throw RuntimeFailure("expert data parallelism: parameter '" + group.names[i] + "' maps to member " +
                             std::to_string(member) + " of a group of " + std::to_string(P));
      ParamGroup& part = parts[static_cast<std::size_t>(member + 1)];
      part.names.push_back(group.names[i]);
      part.params.push_back(group.params[i]);
    }
    for (int64_t j = -1; j < P; ++j) {
      ParamGroup& part = parts[static_cast<std::size_t>(j + 1)];
      if (j >= 0 && part.params.empty()) continue;
      part.weight_decay = group.weight_decay;
      std::vector<int> holders;
      for (int64_t r = j; j >= 0 && r < world_size; r += P) holders.push_back(static_cast<int>(r));
      out.groups.push_back(std::move(part));
      out.holders.push_back(std::move(holders));
    }
  }
  return out;
}

}  // namespace hftrain
