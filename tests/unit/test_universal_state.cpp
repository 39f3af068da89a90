// Universal checkpoints (engine/universal_state.h): saved states of known values -- ZeRO shards of 2
// workers and stage 0's per-parameter files -- are cut into other layouts (per parameter, 3 workers,
// one group per parameter as stage 3 has) and compared with the layouts this test slices itself from the
// full tensors by the documented partition rule; bad files and parameter mismatches name what is wrong.
// Maps with expert groups held by a subset of the ranks (expert parallelism) cut both ways, and zero-to-fp32
// rebuilds their weights.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "commands/zero_to_fp32.h"
#include "engine/partition.h"
#include "engine/universal_state.h"
#include "engine/zero_checkpoint.h"
#include "util/error.h"
#include "util/fs.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  bool decay;
};
const std::vector<Param> kParams = {{"a.weight", {5, 7}, true}, {"b.bias", {5}, false}, {"c.weight", {3, 4}, true}};
// Two members' experts (expert parallelism of 2): member j's parameters are "experts.<j>.*".
const std::vector<Param> kExpertParams = {{"experts.0.w", {4, 3}, true}, {"experts.0.b", {3}, false},
                                          {"experts.1.w", {4, 3}, true}, {"experts.1.b", {3}, false}};
const std::vector<std::string> kSlots = {"exp_avg", "exp_avg_sq"};

// The full training state: per parameter, the fp32 master and each slot; every step counter is 4.
struct FullState {
  std::map<std::string, torch::Tensor> master;
  std::map<std::string, std::map<std::string, torch::Tensor>> slot;
};

FullState make_state(const std::vector<Param>& params = kParams) {
  torch::manual_seed(11);
  FullState s;
  for (const auto& p : params) {
    s.master[p.name] = torch::randn(p.shape);
    for (const auto& slot : kSlots) s.slot[slot][p.name] = torch::rand(p.shape);
  }
  return s;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes(const std::vector<Param>& params = kParams) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& p : params) out.emplace_back(p.name, p.shape);
  return out;
}

std::vector<Param> with_experts() {
  std::vector<Param> all = kParams;
  all.insert(all.end(), kExpertParams.begin(), kExpertParams.end());
  return all;
}

// HF's decay / no-decay groups, or (per_param) one group per parameter as a stage-3 layout has.
PartitionMap make_map(int world, bool per_param) {
  std::vector<PartitionMap::GroupInput> groups(per_param ? kParams.size() : 2);
  for (std::size_t i = 0; i < kParams.size(); ++i) {
    auto& g = groups[per_param ? i : (kParams[i].decay ? 0 : 1)];
    g.weight_decay = kParams[i].decay ? 0.01 : 0.0;
    g.names.push_back(kParams[i].name);
    g.shapes.push_back(kParams[i].shape);
    g.model_index.push_back(static_cast<int64_t>(i));
  }
  return PartitionMap::build(groups, world);
}

// kParams in HF's two groups over every rank, then one group per member's experts held by `holders[j]`
// (empty: every rank, an ordinary map).
PartitionMap make_expert_map(int world, const std::vector<std::vector<int>>& holders) {
  PartitionMap::GroupInput decay, no_decay;
  for (std::size_t i = 0; i < kParams.size(); ++i) {
    auto& g = kParams[i].decay ? decay : no_decay;
    g.names.push_back(kParams[i].name);
    g.shapes.push_back(kParams[i].shape);
    g.model_index.push_back(static_cast<int64_t>(i));
  }
  std::vector<PartitionMap::GroupInput> groups = {decay, no_decay};
  for (std::size_t j = 0; j < holders.size(); ++j) {
    PartitionMap::GroupInput experts;
    experts.ranks = holders[j];
    for (std::size_t i = 0; i < kExpertParams.size(); ++i)
      if (kExpertParams[i].name.rfind("experts." + std::to_string(j) + ".", 0) == 0) {
        experts.names.push_back(kExpertParams[i].name);
        experts.shapes.push_back(kExpertParams[i].shape);
        experts.model_index.push_back(static_cast<int64_t>(kParams.size() + i));
      }
    groups.push_back(experts);
  }
  return PartitionMap::build(groups, world);
}

// Group g's flat buffer of `values` (per parameter), padded with zeros.
torch::Tensor flat(const PartitionMap& map, std::size_t g, const std::map<std::string, torch::Tensor>& values) {
  const FlatGroupInfo& info = map.groups[g];
  auto out = torch::zeros({info.padded_numel});
  for (const auto& p : info.params) out.narrow(0, p.offset, p.numel).copy_(values.at(p.name).reshape({-1}));
  return out;
}

// What rank r of `map` holds, keyed as its shard is: empty tensors (and the step) for a group it does not hold,
// or (with_unheld false) no tensors for it.
std::map<std::string, torch::Tensor> expected_shard(const PartitionMap& map, int r, const FullState& s, bool with_unheld = true) {
  std::map<std::string, torch::Tensor> out;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    const FlatGroupInfo& info = map.groups[g];
    if (!with_unheld && !info.held_by(r)) continue;
    const std::string k = std::to_string(g);
    out["fp32_flat_group_" + k] = flat(map, g, s.master).narrow(0, info.partition_begin(r), info.partition_real(r)).clone();
    for (const auto& slot : kSlots)
      out["optimizer_state.flat_group_" + k + "." + slot] =
          flat(map, g, s.slot.at(slot)).narrow(0, info.partition_begin(r), info.partition_numel(r)).clone();
    out["optimizer_state.flat_group_" + k + ".step"] = torch::tensor(int64_t{4});
  }
  return out;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_unit_universal_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A ZeRO checkpoint of `map` (stage 2) holding `s`; `omit_unheld`: the ranks from that one on leave the empty
// tensors of groups they do not hold out of their shards.
void write_sharded(const fs::path& dir, const PartitionMap& map, const FullState& s, int omit_unheld = INT32_MAX) {
  fs::create_directories(dir / "global_step4");
  write_file_atomic((dir / "latest").string(), "global_step4");
  for (int r = 0; r < map.world_size; ++r) {
    NamedTensors tensors;
    for (const auto& [k, v] : expected_shard(map, r, s, r < omit_unheld)) tensors.emplace_back(k, v);
    save_safetensors((dir / "global_step4" / zero_shard_file_name(r)).string(), tensors, zero_shard_metadata(2, "bf16", r, map));
  }
}

// A stage-0 checkpoint holding `s`: model.safetensors (with a buffer) and optimizer.safetensors.
void write_stage0(const fs::path& dir, const FullState& s) {
  NamedTensors model, optim;
  for (const auto& p : kParams) {
    model.emplace_back(p.name, s.master.at(p.name));
    for (const auto& slot : kSlots) optim.emplace_back(p.name + "." + slot, s.slot.at(slot).at(p.name));
    optim.emplace_back(p.name + ".step", torch::tensor(int64_t{4}));
  }
  model.emplace_back("attn.bias_mask", torch::ones({2, 2}));
  save_safetensors((dir / "model.safetensors").string(), model);
  save_safetensors((dir / "optimizer.safetensors").string(), optim);
}

void check_equal_maps(const std::map<std::string, torch::Tensor>& got, const std::map<std::string, torch::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [k, v] : want) {
    INFO(k);
    REQUIRE(got.count(k) == 1);
    CHECK(got.at(k).sizes() == v.sizes());
    CHECK(torch::equal(got.at(k), v));
  }
}

void check_cut_into_shards(const SlabLayout& saved, const PartitionMap& map, const FullState& s) {
  for (int r = 0; r < map.world_size; ++r) {
    INFO("rank " << r << " of " << map.world_size);
    CutState cut = cut_state(saved, shard_state_layout(map, r, 2));
    std::map<std::string, torch::Tensor> got = cut.state;
    for (auto& [k, v] : cut.masters) got[k] = v;
    check_equal_maps(got, expected_shard(map, r, s));
  }
}

void check_cut_per_parameter(const SlabLayout& saved, const FullState& s, const std::vector<Param>& params = kParams) {
  CutState cut = cut_state(saved, per_parameter_state_layout(param_shapes(params)));
  check_equal_maps(cut.masters, s.master);
  std::map<std::string, torch::Tensor> want;
  for (const auto& p : params) {
    for (const auto& slot : kSlots) want[p.name + "." + slot] = s.slot.at(slot).at(p.name);
    want[p.name + ".step"] = torch::tensor(int64_t{4});
  }
  check_equal_maps(cut.state, want);
}

}  // namespace

TEST_CASE("ZeRO shards of 2 workers cut exactly into any layout", "[unit][universal]") {
  const FullState s = make_state();
  const fs::path dir = fresh_dir("sharded");
  write_sharded(dir, make_map(2, false), s);
  const SlabLayout saved = saved_state_layout(dir.string());
  CHECK(saved.describe() == "2 workers at ZeRO stage 2 (bf16)");
  CHECK(saved.trainable == std::vector<std::string>{"a.weight", "b.bias", "c.weight"});
  check_cut_per_parameter(saved, s);
  check_cut_into_shards(saved, make_map(3, false), s);
  check_cut_into_shards(saved, make_map(1, false), s);
  check_cut_into_shards(saved, make_map(3, true), s);  // one group per parameter, as stage 3 lays them out
  fs::remove_all(dir);
}

TEST_CASE("A stage-0 checkpoint cuts exactly into ZeRO shards", "[unit][universal]") {
  const FullState s = make_state();
  const fs::path dir = fresh_dir("stage0");
  write_stage0(dir, s);
  const SlabLayout saved = saved_state_layout(dir.string());
  CHECK(saved.zero_stage == 0);
  CHECK(saved.trainable == std::vector<std::string>{"a.weight", "b.bias", "c.weight"});  // file order, buffer left out
  check_cut_into_shards(saved, make_map(2, false), s);
  check_cut_into_shards(saved, make_map(4, true), s);
  check_cut_per_parameter(saved, s);
  fs::remove_all(dir);
}

TEST_CASE("Expert groups held by some ranks cut exactly into and out of any layout", "[unit][universal]") {
  const std::vector<Param> params = with_experts();
  const FullState s = make_state(params);
  const fs::path dir = fresh_dir("experts");
  // World 4, expert parallelism 2: member 0's experts on ranks {0, 2}, member 1's on {1, 3}. Rank 3 leaves the
  // empty tensors of the group it does not hold out of its shard, the others write them.
  write_sharded(dir, make_expert_map(4, {{0, 2}, {1, 3}}), s, 3);
  const SlabLayout saved = saved_state_layout(dir.string());
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  CHECK(saved.trainable == names);
  check_cut_per_parameter(saved, s, params);
  check_cut_into_shards(saved, make_expert_map(2, {{}, {}}), s);
  check_cut_into_shards(saved, make_expert_map(4, {{}, {}}), s);
  check_cut_into_shards(saved, make_expert_map(2, {{0}, {1}}), s);
  check_cut_into_shards(saved, make_expert_map(4, {{0, 1, 3}, {2}}), s);
  // The reverse: an ordinary checkpoint, and one of other holders, cut into expert groups.
  const fs::path plain = fresh_dir("experts_plain");
  write_sharded(plain, make_expert_map(2, {{}, {}}), s);
  check_cut_into_shards(saved_state_layout(plain.string()), make_expert_map(4, {{0, 2}, {1, 3}}), s);
  const fs::path other = fresh_dir("experts_other");
  write_sharded(other, make_expert_map(2, {{0}, {1}}), s);
  check_cut_into_shards(saved_state_layout(other.string()), make_expert_map(4, {{0, 2}, {1, 3}}), s);
  for (const auto& d : {dir, plain, other}) fs::remove_all(d);
}

TEST_CASE("zero-to-fp32 rebuilds the parameters of groups held by some ranks", "[unit][universal]") {
  const std::vector<Param> params = with_experts();
  const FullState s = make_state(params);
  const fs::path dir = fresh_dir("experts_fp32");
  const PartitionMap map = make_expert_map(4, {{0, 2}, {1, 3}});
  write_sharded(dir, map, s, 3);
  std::vector<std::string> order;
  for (const auto& p : params) order.push_back(p.name);
  order.push_back("attn.bias_mask");
  save_safetensors((dir / "global_step4" / kZeroModelStatesFile).string(), {{"attn.bias_mask", torch::ones({2, 2})}},
                   zero_model_states_metadata(order, "{}", 2, 4, 4));
  const fs::path out = dir / "fp32";
  REQUIRE(run_zero_to_fp32({dir.string(), out.string(), "5GB"}) == 0);
  const SafetensorsFile rebuilt = load_safetensors((out / "model.safetensors").string());
  CHECK(rebuilt.tensors.size() == params.size() + 1);
  for (const auto& p : params) {
    INFO(p.name);
    REQUIRE(rebuilt.tensors.count(p.name) == 1);
    CHECK(torch::equal(rebuilt.tensors.at(p.name), s.master.at(p.name)));
  }
  // A rank that does not hold a group must hold no values of it (rank 1 holds member 1's experts, group 3).
  const std::string rank1 = (dir / "global_step4" / zero_shard_file_name(1)).string();
  NamedTensors tensors;
  for (const auto& [k, v] : expected_shard(map, 1, s)) tensors.emplace_back(k, k == "fp32_flat_group_2" ? torch::zeros({3}) : v);
  save_safetensors(rank1, tensors, zero_shard_metadata(2, "bf16", 1, map));
  CHECK_THROWS_WITH(run_zero_to_fp32({dir.string(), out.string(), "5GB"}),
                    Catch::Contains(rank1) && Catch::Contains("'fp32_flat_group_2' holds 3 fp32 values, the partition "
                                                              "metadata says 0"));
  fs::remove_all(dir);
}

TEST_CASE("Universal state names the file or parameter at fault", "[unit][universal]") {
  const FullState s = make_state();
  const fs::path dir = fresh_dir("faults");
  const PartitionMap map = make_map(2, false);
  const std::string rank1 = (dir / "global_step4" / zero_shard_file_name(1)).string();

  SECTION("a missing shard") {
    write_sharded(dir, map, s);
    fs::remove(rank1);
    CHECK_THROWS_WITH(saved_state_layout(dir.string()), Catch::Contains("missing ZeRO shard '" + rank1 + "'"));
  }
  SECTION("a shard of another save") {
    write_sharded(dir, map, s);
    const PartitionMap other = make_map(2, true);
    save_safetensors(rank1, {{"fp32_flat_group_0", torch::zeros({1})}}, zero_shard_metadata(2, "bf16", 1, other));
    CHECK_THROWS_WITH(saved_state_layout(dir.string()),
                      Catch::Contains("'" + rank1 + "': its 'partition' differs from rank 0's shard"));
  }
  SECTION("a corrupted partition map") {
    write_sharded(dir, map, s);
    const std::string rank0 = (dir / "global_step4" / zero_shard_file_name(0)).string();
    auto meta = zero_shard_metadata(2, "bf16", 0, map);
    meta["partition"] = "{\"world_size\": 2, \"groups\": [";
    save_safetensors(rank0, {{"fp32_flat_group_0", torch::zeros({1})}}, meta);
    CHECK_THROWS_WITH(saved_state_layout(dir.string()), Catch::Contains("'" + rank0 + "'"));
  }
  SECTION("a parameter the checkpoint lacks, or holds in another shape") {
    write_sharded(dir, map, s);
    const SlabLayout saved = saved_state_layout(dir.string());
    auto params = param_shapes();
    params.emplace_back("d.weight", std::vector<int64_t>{2, 2});
    CHECK_THROWS_AS(cut_state(saved, per_parameter_state_layout(params)), ConfigError);
    CHECK_THROWS_WITH(cut_state(saved, per_parameter_state_layout(params)), Catch::Contains("no parameter 'd.weight' [2, 2]"));
    params = param_shapes();
    params[0].second = {7, 5};
    CHECK_THROWS_WITH(cut_state(saved, per_parameter_state_layout(params)),
                      Catch::Contains("parameter 'a.weight' is [5, 7] in the checkpoint but [7, 5] in this model"));
    params = param_shapes();
    params.pop_back();
    CHECK_THROWS_WITH(cut_state(saved, per_parameter_state_layout(params)),
                      Catch::Contains("trains parameter 'c.weight' [3, 4]") && Catch::Contains("ignore_optimizer_state"));
  }
  SECTION("a factored optimizer state cannot change layout") {
    write_stage0(dir, s);
    save_safetensors((dir / "optimizer.safetensors").string(),
                     {{"a.weight.exp_avg_sq_row", torch::zeros({5})}, {"a.weight.step", torch::tensor(int64_t{4})}});
    const SlabLayout saved = saved_state_layout(dir.string());
    CHECK_THROWS_WITH(cut_state(saved, shard_state_layout(map, 0, 2)),
                      Catch::Contains("'a.weight.exp_avg_sq_row' is [5]") && Catch::Contains("cannot be re-partitioned"));
  }
  fs::remove_all(dir);
}
