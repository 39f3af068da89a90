// Flat layout and partitioning of parameter groups (see partition.h).
#include "engine/partition.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace hftrain {
namespace {

std::vector<int> every_rank_below(int world_size) {
  std::vector<int> ranks(static_cast<std::size_t>(std::max(world_size, 0)));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

// "" when `ranks` are ascending, unique and in [0, world_size) (and not empty), else what is wrong.
std::string holder_ranks_problem(const std::vector<int>& ranks, int world_size) {
  if (ranks.empty()) return "lists no rank";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size)
      return "lists rank " + std::to_string(ranks[i]) + ", outside [0, " + std::to_string(world_size) + ")";
    if (i > 0 && ranks[i] <= ranks[i - 1]) return "lists its ranks out of ascending order or twice";
  }
  return "";
}

}  // namespace

int FlatGroupInfo::member(int rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return it != ranks.end() && *it == rank ? static_cast<int>(it - ranks.begin()) : -1;
}

int64_t FlatGroupInfo::partition_begin(int rank) const {
  const int m = member(rank);
  return m < 0 ? 0 : static_cast<int64_t>(m) * partition_size;
}

int64_t FlatGroupInfo::partition_real(int rank) const {
  if (!held_by(rank)) return 0;
  return overlap(partition_begin(rank), partition_begin(rank) + partition_size, 0, numel);
}

PartitionMap PartitionMap::build(const std::vector<GroupInput>& inputs, int world_size, int64_t alignment) {
  if (world_size < 1) throw RuntimeFailure("partition: world size must be at least 1");
  PartitionMap map;
  map.world_size = world_size;
  map.alignment = alignment;
  for (const auto& in : inputs) {
    FlatGroupInfo g;
    g.weight_decay = in.weight_decay;
    g.ranks = in.ranks.empty() ? every_rank_below(world_size) : in.ranks;
    const std::string problem = holder_ranks_problem(g.ranks, world_size);
    if (!problem.empty())
      throw RuntimeFailure("partition: group " + std::to_string(map.groups.size()) + "'s holder ranks " + problem);
    for (std::size_t i = 0; i < in.names.size(); ++i) {
      FlatParamInfo p;
      p.name = in.names[i];
      p.shape = in.shapes[i];
      p.numel = 1;
      for (auto d : p.shape) p.numel *= d;
      p.offset = g.numel;
      p.model_index = i < in.model_index.size() ? in.model_index[i] : static_cast<int64_t>(i);
      g.numel += p.numel;
      g.params.push_back(p);
    }
    const int64_t unit = alignment * g.holders();
    g.padded_numel = (g.numel + unit - 1) / unit * unit;
    g.partition_size = g.padded_numel / g.holders();
    map.groups.push_back(std::move(g));
  }
  return map;
}

int64_t PartitionMap::total_numel() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.numel;
  return n;
}

int64_t PartitionMap::total_padded() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.padded_numel;
  return n;
}

int64_t PartitionMap::partition_numel(int rank) const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.partition_numel(rank);
  return n;
}

nlohmann::json PartitionMap::to_json() const {
  nlohmann::json j;
  j["world_size"] = world_size;
  j["alignment"] = alignment;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json gj;
    gj["weight_decay"] = g.weight_decay;
    gj["numel"] = g.numel;
    gj["padded_numel"] = g.padded_numel;
    gj["partition_size"] = g.partition_size;
    if (g.ranks != every_rank_below(world_size)) gj["ranks"] = g.ranks;
    gj["params"] = nlohmann::json::array();
    for (const auto& p : g.params)
      gj["params"].push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel},
                              {"model_index", p.model_index}});
    j["groups"].push_back(gj);
  }
  return j;
}

PartitionMap PartitionMap::from_json(const nlohmann::json& j, const std::string& source) {
  auto fail = [&](const std::string& why) { return RuntimeFailure("'" + source + "': partition metadata " + why); };
  PartitionMap map;
  try {
    map.world_size = j.at("world_size").get<int>();
    map.alignment = j.at("alignment").get<int64_t>();
    if (map.world_size < 1 || map.alignment < 1) throw fail("has a non-positive world_size or alignment");
    for (const auto& gj : j.at("groups")) {
      const std::string group = "group " + std::to_string(map.groups.size());
      FlatGroupInfo g;
      g.ranks = gj.contains("ranks") ? gj.at("ranks").get<std::vector<int>>() : every_rank_below(map.world_size);
      const std::string problem = holder_ranks_problem(g.ranks, map.world_size);
      if (!problem.empty()) throw fail(group + "'s \"ranks\" " + problem);
      g.weight_decay = gj.at("weight_decay").get<double>();
      g.numel = gj.at("numel").get<int64_t>();
      g.padded_numel = gj.at("padded_numel").get<int64_t>();
      g.partition_size = gj.at("partition_size").get<int64_t>();
      int64_t cursor = 0;
      for (const auto& pj : gj.at("params")) {
        FlatParamInfo p;
        p.name = pj.at("name").get<std::string>();
        p.shape = pj.at("shape").get<std::vector<int64_t>>();
        p.offset = pj.at("offset").get<int64_t>();
        p.numel = pj.at("numel").get<int64_t>();
        p.model_index = pj.at("model_index").get<int64_t>();
        int64_t n = 1;
        for (auto d : p.shape) {
          if (d < 0) throw fail("gives '" + p.name + "' a negative dimension");
          n *= d;
        }
        if (n != p.numel) throw fail("gives '" + p.name + "' numel " + std::to_string(p.numel) + " but its shape holds " + std::to_string(n));
        if (p.offset != cursor) throw fail("places '" + p.name + "' at offset " + std::to_string(p.offset) + " instead of " + std::to_string(cursor));
        cursor += p.numel;
        g.params.push_back(p);
      }
      if (cursor != g.numel) throw fail("group numel " + std::to_string(g.numel) + " does not match its parameters (" + std::to_string(cursor) + ")");
      if (g.padded_numel < g.numel || g.padded_numel % (map.alignment * g.holders()) != 0 ||
          g.partition_size * g.holders() != g.padded_numel)
        throw fail("has inconsistent padded_numel / partition_size in " + group + " (held by " +
                   std::to_string(g.holders()) + " of " + std::to_string(map.world_size) + " ranks)");
      map.groups.push_back(std::move(g));
    }
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("is malformed: ") + e.what());
  }
  return map;
}

}  // namespace hftrain
