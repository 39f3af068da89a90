// Universal checkpoints (engine/universal_state.h): saved states of known values -- ZeRO shards of 2
// workers and stage 0's per-parameter files -- are cut into other layouts (per parameter, 3 workers,
// one group per parameter as stage 3 has) and compared with the layouts this test slices itself from the
// full tensors by the documented partition rule; bad files and parameter mismatches name what is wrong.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/safetensors.h"
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
const std::vector<std::string> kSlots = {"exp_avg", "exp_avg_sq"};

// The full training state: per parameter, the fp32 master and each slot; every step counter is 4.
struct FullState {
  std::map<std::string, torch::Tensor> master;
  std::map<std::string, std::map<std::string, torch::Tensor>> slot;
};

FullState make_state() {
  torch::manual_seed(11);
  FullState s;
  for (const auto& p : kParams) {
    s.master[p.name] = torch::randn(p.shape);
    for (const auto& slot : kSlots) s.slot[slot][p.name] = torch::rand(p.shape);
  }
  return s;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& p : kParams) out.emplace_back(p.name, p.shape);
  return out;
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

// Group g's flat buffer of `values` (per parameter), padded with zeros.
torch::Tensor flat(const PartitionMap& map, std::size_t g, const std::map<std::string, torch::Tensor>& values) {
  const FlatGroupInfo& info = map.groups[g];
  auto out = torch::zeros({info.padded_numel});
  for (const auto& p : info.params) out.narrow(0, p.offset, p.numel).copy_(values.at(p.name).reshape({-1}));
  return out;
}

// What rank r of `map` holds, keyed as its shard is.
std::map<std::string, torch::Tensor> expected_shard(const PartitionMap& map, int r, const FullState& s) {
  std::map<std::string, torch::Tensor> out;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    const FlatGroupInfo& info = map.groups[g];
    const std::string k = std::to_string(g);
    out["fp32_flat_group_" + k] = flat(map, g, s.master).narrow(0, info.partition_begin(r), info.partition_real(r)).clone();
    for (const auto& slot : kSlots)
      out["optimizer_state.flat_group_" + k + "." + slot] =
          flat(map, g, s.slot.at(slot)).narrow(0, info.partition_begin(r), info.partition_size).clone();
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

// A ZeRO checkpoint of `map` (stage 2) holding `s`.
void write_sharded(const fs::path& dir, const PartitionMap& map, const FullState& s) {
  fs::create_directories(dir / "global_step4");
  write_file_atomic((dir / "latest").string(), "global_step4");
  for (int r = 0; r < map.world_size; ++r) {
    NamedTensors tensors;
    for (const auto& [k, v] : expected_shard(map, r, s)) tensors.emplace_back(k, v);
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

void check_cut_per_parameter(const SlabLayout& saved, const FullState& s) {
  CutState cut = cut_state(saved, per_parameter_state_layout(param_shapes()));
  check_equal_maps(cut.masters, s.master);
  std::map<std::string, torch::Tensor> want;
  for (const auto& p : kParams) {
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
