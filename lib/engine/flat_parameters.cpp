// Flat parameter buffers and the ZeRO-3 unit layout (see flat_parameters.h).
#include "engine/flat_parameters.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "util/error.h"
#include "util/tensor_storage.h"

namespace hftrain {

UnitLayout unit_layout(const std::vector<ParamGroup>& groups, const std::vector<std::vector<std::string>>& units,
                       int64_t persistence_threshold) {
  struct Where {
    std::size_t group, index;
  };
  std::map<std::string, Where> where;
  for (std::size_t w = 0; w < groups.size(); ++w)
    for (std::size_t i = 0; i < groups[w].names.size(); ++i) where[groups[w].names[i]] = {w, i};
  std::map<std::string, std::vector<std::size_t>> used_by;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) used_by[name].push_back(u);

  UnitLayout layout;
  std::map<std::tuple<std::size_t, std::size_t, int>, std::size_t> flat_of;  // (unit or -1, wd group, kind) -> flat group
  std::map<std::string, std::size_t> group_of_param;
  auto place = [&](std::size_t key_unit, std::size_t w, int kind, const std::string& name) {
    auto key = std::make_tuple(key_unit, w, kind);
    auto it = flat_of.find(key);
    if (it == flat_of.end()) {
      it = flat_of.emplace(key, layout.groups.size()).first;
      ParamGroup g;
      g.weight_decay = groups[w].weight_decay;
      layout.groups.push_back(g);
      layout.persistent.push_back(kind == 2);
    }
    const Where at = where.at(name);
    layout.groups[it->second].names.push_back(name);
    layout.groups[it->second].params.push_back(groups[at.group].params[at.index]);
    group_of_param[name] = it->second;
  };
  const std::size_t no_unit = units.size();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) {
      auto found = where.find(name);
      if (found == where.end() || group_of_param.count(name) || used_by[name].front() != u) continue;
      const torch::Tensor& p = groups[found->second.group].params[found->second.index];
      const bool persistent = p.numel() < persistence_threshold;
      place(persistent ? no_unit : u, found->second.group, persistent ? 2 : used_by[name].size() > 1 ? 1 : 0, name);
    }
  for (const auto& [name, at] : where)
    if (!group_of_param.count(name))
      throw RuntimeFailure("ZeRO-3 engine: parameter '" + name + "' is used by none of the model's gather units");
  layout.unit_groups.assign(units.size(), {});
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) {
      auto it = group_of_param.find(name);
      if (it == group_of_param.end() || layout.persistent[it->second]) continue;
      auto& list = layout.unit_groups[u];
      if (std::find(list.begin(), list.end(), it->second) == list.end()) list.push_back(it->second);
    }
  return layout;
}

namespace {

// A parameter of sharded construction (zero.Init) waits on the host without memory: its initial value is
// computed there (the host generator's draws) and only this rank's partition goes to the engine's device.
bool released_on_host(const torch::Tensor& p) { return p.is_cpu() && p.numel() > 0 && p.storage().nbytes() == 0; }

}  // namespace

PartitionMap map_groups(const std::vector<ParamGroup>& groups, const std::vector<std::string>& model_order, int world,
                        torch::Device device, const std::vector<std::vector<int>>& holders) {
  std::map<std::string, int64_t> index_of;
  for (std::size_t i = 0; i < model_order.size(); ++i) index_of[model_order[i]] = static_cast<int64_t>(i);
  std::unordered_set<const void*> seen;
  std::vector<PartitionMap::GroupInput> inputs;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const ParamGroup& g = groups[k];
    PartitionMap::GroupInput in;
    in.weight_decay = g.weight_decay;
    if (k < holders.size()) in.ranks = holders[k];
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      const auto& p = g.params[i];
      if (p.scalar_type() != torch::kFloat32 || (p.device() != device && !released_on_host(p)))
        throw RuntimeFailure("data-parallel engine: parameter '" + g.names[i] + "' is not an fp32 tensor on " + device.str() +
                             " (it is " + std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() + ")");
      if (!seen.insert(p.unsafeGetTensorImpl()).second)
        throw RuntimeFailure("data-parallel engine: parameter '" + g.names[i] + "' appears twice in the parameter groups");
      in.names.push_back(g.names[i]);
      in.shapes.push_back(p.sizes().vec());
      auto it = index_of.find(g.names[i]);
      in.model_index.push_back(it == index_of.end() ? static_cast<int64_t>(index_of.size() + i) : it->second);
    }
    inputs.push_back(std::move(in));
  }
  return PartitionMap::build(inputs, world);
}

namespace {

// Makes group g's parameters views of `flat`.
std::vector<torch::Tensor> view_parameters(ParamGroup& group, const FlatGroupInfo& info, const torch::Tensor& flat) {
  std::vector<torch::Tensor> ps;
  for (std::size_t i = 0; i < info.params.size(); ++i) {
    auto& p = group.params[i];
    p.set_data(flat.narrow(0, info.params[i].offset, info.params[i].numel).view(p.sizes()));
    ps.push_back(p);
  }
  return ps;
}

}  // namespace

FlatParameters adopt_parameters(std::vector<ParamGroup>& groups, const PartitionMap& map, torch::ScalarType dtype,
                                const std::vector<Comm*>& comms, const GroupValuesSink& take_values, torch::Device device) {
  torch::NoGradGuard no_grad;
  FlatParameters out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const FlatGroupInfo& info = map.groups[g];
    if (!comms[g]) {  // held by other ranks only
      for (auto& p : groups[g].params)
        if (p.storage().use_count() == 1) release_storage(p);
      // (views are made of an allocated buffer, then its storage goes: LibTorch checks a view's bounds)
      auto released = torch::empty({info.padded_numel}, torch::TensorOptions().dtype(dtype).device(device));
      view_parameters(groups[g], info, released);
      release_storage(released);
      const torch::Tensor none = torch::empty({0}, torch::TensorOptions().dtype(dtype).device(device));
      out.params.emplace_back();
      out.flat.push_back(none);
      take_values(g, dtype == torch::kFloat32 ? none : torch::empty({0}, torch::TensorOptions().device(device)), none);
      continue;
    }
    auto values = torch::zeros({info.padded_numel}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    for (std::size_t i = 0; i < info.params.size(); ++i) {
      const torch::Tensor& p = groups[g].params[i];
      values.narrow(0, info.params[i].offset, info.params[i].numel).copy_(p.detach().reshape({-1}));
      // The values are in the flat buffer now: free the parameter's own memory at once rather than when it
      // becomes a view below, so that construction never holds the model twice over (unless shared).
      if (p.storage().use_count() == 1) release_storage(p);
    }
    if (comms[g]->world_size() > 1 && info.padded_numel > 0)
      comms[g]->broadcast(values, 0, "initial parameters of group " + std::to_string(g));
    auto flat = dtype == torch::kFloat32 ? values : values.to(dtype);
    out.params.push_back(view_parameters(groups[g], info, flat));
    out.flat.push_back(flat);
    take_values(g, values, flat);
  }
  return out;
}

std::vector<torch::Tensor> read_initial_partitions(const PartitionMap& map, int rank, const InitialValues& initial_values,
                                                   torch::Device device) {
  std::vector<torch::Tensor> partitions;
  for (const auto& info : map.groups)
    partitions.push_back(torch::zeros({info.partition_size}, torch::TensorOptions().dtype(torch::kFloat32).device(device)));
  std::map<std::string, std::pair<std::size_t, std::size_t>> where;  // name -> (group, index)
  for (std::size_t g = 0; g < map.groups.size(); ++g)
    for (std::size_t i = 0; i < map.groups[g].params.size(); ++i) where[map.groups[g].params[i].name] = {g, i};
  std::set<std::string> received;
  initial_values([&](const std::string& name, const ValueReader& read) {
    auto it = where.find(name);
    if (it == where.end()) return true;  // not trained here: it stays whole in the model
    received.insert(name);
    const FlatGroupInfo& info = map.groups[it->second.first];
    const auto& at = info.params[it->second.second];
    const int64_t begin = info.partition_begin(rank), end = begin + info.partition_size;
    const int64_t lo = std::max(begin, at.offset), hi = std::min(end, at.offset + at.numel);
    if (lo < hi) partitions[it->second.first].narrow(0, lo - begin, hi - lo).copy_(read(lo - at.offset, hi - lo));
    return false;
  });
  for (const auto& [name, at] : where)
    if (!received.count(name))
      throw RuntimeFailure("ZeRO-3 sharded construction: no initial value arrived for parameter '" + name + "'");
  return partitions;
}

FlatParameters adopt_released_parameters(std::vector<ParamGroup>& groups, const PartitionMap& map, torch::ScalarType dtype,
                                         const std::vector<bool>& persistent, torch::Device device) {
  torch::NoGradGuard no_grad;
  FlatParameters out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    // The full buffer exists just long enough for the parameters (released since construction) to become
    // views of it; the persistent groups keep it (they are gathered whole from the shards).
    auto flat = torch::empty({map.groups[g].padded_numel}, torch::TensorOptions().dtype(dtype).device(device));
    out.params.push_back(view_parameters(groups[g], map.groups[g], flat));
    if (!persistent[g]) release_storage(flat);
    out.flat.push_back(flat);
  }
  return out;
}

}  // namespace hftrain
