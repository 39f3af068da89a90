// ZeRO-3 partitioning of the frozen parameters (see frozen_partition.h).
#include "engine/frozen_partition.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "util/tensor_storage.h"

namespace hftrain {
namespace {

// The same padding rule as the trainable groups (engine/partition.h): a multiple of 2 * world.
int64_t padded(int64_t numel, int world) {
  const int64_t unit = 2 * static_cast<int64_t>(world);
  return (numel + unit - 1) / unit * unit;
}

}  // namespace

int64_t FrozenGroups::shard_bytes() const {
  int64_t n = 0;
  for (const auto& s : shard) n += static_cast<int64_t>(s.nbytes());
  return n;
}

FrozenGroups partition_frozen(const std::vector<NamedTensorList>& units, int64_t persistence_threshold, int rank, int world) {
  torch::NoGradGuard no_grad;
  // Which units use each tensor (tied weights: several), in the units' order.
  std::map<const void*, std::vector<std::size_t>> used_by;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& [name, p] : units[u]) {
      auto& list = used_by[p.unsafeGetTensorImpl()];
      if (list.empty() || list.back() != u) list.push_back(u);
    }

  struct Pending {
    std::vector<torch::Tensor> params;
    std::vector<std::size_t> units;
  };
  std::vector<Pending> pending;
  // (first unit, or units.size() for a shared tensor; dtype) -> group
  std::map<std::tuple<std::size_t, int>, std::size_t> group_of;
  std::map<const void*, bool> placed;
  FrozenGroups out;
  const std::size_t shared = units.size();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& [name, p] : units[u]) {
      const void* key = p.unsafeGetTensorImpl();
      if (placed.count(key)) continue;
      placed[key] = true;
      if (p.numel() < persistence_threshold) {
        out.whole_elements += p.numel();
        continue;
      }
      const std::vector<std::size_t>& users = used_by.at(key);
      const auto where = std::make_tuple(users.size() > 1 ? shared : u, static_cast<int>(p.scalar_type()));
      auto it = group_of.find(where);
      if (it == group_of.end()) {
        it = group_of.emplace(where, pending.size()).first;
        pending.emplace_back();
      }
      Pending& group = pending[it->second];
      group.params.push_back(p);
      for (std::size_t v : users)
        if (std::find(group.units.begin(), group.units.end(), v) == group.units.end()) group.units.push_back(v);
    }

  out.unit_groups.assign(units.size(), {});
  for (std::size_t g = 0; g < pending.size(); ++g) {
    const Pending& group = pending[g];
    int64_t numel = 0;
    for (const auto& p : group.params) numel += p.numel();
    out.partitioned_elements += numel;
    const torch::Tensor& first = group.params.front();
    torch::Tensor full = torch::zeros({padded(numel, world)}, first.options().requires_grad(false));
    int64_t offset = 0;
    for (torch::Tensor p : group.params) {  // a handle on the model's parameter
      torch::Tensor view = full.narrow(0, offset, p.numel());
      view.copy_(p.detach().reshape({-1}));
      if (p.storage().use_count() == 1) release_storage(p);  // never hold the base twice over
      p.set_data(view.view(p.sizes()));
      offset += p.numel();
    }
    const int64_t size = full.numel() / world;
    out.shard.push_back(full.narrow(0, rank * size, size).clone());
    out.full.push_back(full);  // whole: the coordinator releases it
    for (std::size_t u : group.units) out.unit_groups[u].push_back(out.full.size() - 1);
  }
  return out;
}

}  // namespace hftrain
