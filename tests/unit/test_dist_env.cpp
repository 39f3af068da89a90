// Distributed building blocks without processes: worker environment parsing (torchrun and SLURM
// variables), the DistributedSampler shard rule (hand-computed from torch 1.13's
// DistributedSampler), the ZeRO partition layout (DeepSpeed stage 1/2 padding rule, groups held by a subset of
// the ranks) and size parsing.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "commands/zero_to_fp32.h"
#include "data/loader.h"
#include "distributed/env.h"
#include "engine/partition.h"
#include "util/error.h"
#include "fake_env.h"

using hftrain_test::fake_env;

using namespace hftrain;

TEST_CASE("no launcher variables: a plain single process", "[unit][dist]") {
  DistEnv env = detect_dist_env(fake_env({{"HOME", "/root"}}));
  CHECK_FALSE(env.is_worker());
  CHECK(env.world_size == 1);
  CHECK(env.rank == 0);
}

TEST_CASE("torchrun variables make a worker", "[unit][dist]") {
  DistEnv env = detect_dist_env(fake_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29511"}}));
  CHECK(env.is_worker());
  CHECK(env.source == "torchrun");
  CHECK(env.rank == 3);
  CHECK(env.world_size == 4);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "10.0.0.1");
  CHECK(env.master_port == 29511);
}

TEST_CASE("torchrun variables are validated with the variable named", "[unit][dist]") {
  auto fails_with = [](std::map<std::string, std::string> vars, const std::string& needle) {
    try {
      detect_dist_env(fake_env(vars));
      FAIL("expected a ConfigError mentioning " << needle);
    } catch (const ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  fails_with({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}, "RANK='x'");
  fails_with({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}, "not below the world size");
  fails_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_ADDR");
  fails_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000");
  fails_with({{"WORLD_SIZE", "2"}}, "RANK is not");
}

TEST_CASE("torchrun's agent-store variables: every rank joins the agent's store, attempt from TORCHELASTIC_RESTART_COUNT",
          "[unit][dist]") {
  // What torchrun's agent sets for a worker (torch/distributed/elastic/agent/server/local_elastic_agent.py).
  std::map<std::string, std::string> vars{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", "29500"}, {"GROUP_RANK", "0"}, {"ROLE_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "none"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "3"}};
  DistEnv env = detect_dist_env(fake_env(vars));
  CHECK(env.agent_store);
  CHECK(env.restart_count == 3);
  CHECK_THAT(env.describe(), Catch::Contains("torchrun's agent store"));
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";  // torchrun's c10d rendezvous: rank 0 hosts the store
  CHECK_FALSE(detect_dist_env(fake_env(vars)).agent_store);
  vars.erase("TORCHELASTIC_USE_AGENT_STORE");
  CHECK_FALSE(detect_dist_env(fake_env(vars)).agent_store);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "yes please";
  CHECK_THROWS_WITH(detect_dist_env(fake_env(vars)), Catch::Contains("TORCHELASTIC_USE_AGENT_STORE='yes please'"));
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars["TORCHELASTIC_RESTART_COUNT"] = "-1";
  CHECK_THROWS_WITH(detect_dist_env(fake_env(vars)), Catch::Contains("TORCHELASTIC_RESTART_COUNT=-1"));
  // hftrain's own launcher counts its restarts in HFTRAIN_RESTART_COUNT.
  CHECK(detect_dist_env(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"HFTRAIN_RESTART_COUNT", "2"}})).restart_count == 2);
}

TEST_CASE("SLURM job-step variables make a worker, the batch script itself does not", "[unit][dist]") {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "1"},         {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                                             {"MASTER_ADDR", "node01"},      {"SLURM_STEP_ID", "0"}};
  DistEnv env = detect_dist_env(fake_env(vars));
  CHECK(env.source == "slurm");
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 4);
  CHECK(env.master_addr == "node01");
  CHECK(env.master_port == 29500);
  vars.erase("SLURM_STEP_ID");
  CHECK_FALSE(detect_dist_env(fake_env(vars)).is_worker());
  // torchrun's variables win over SLURM's.
  vars["SLURM_STEP_ID"] = "0";
  vars["RANK"] = "0";
  vars["WORLD_SIZE"] = "2";
  vars["MASTER_PORT"] = "1234";
  CHECK(detect_dist_env(fake_env(vars)).source == "torchrun");
}

TEST_CASE("distributed shard follows torch DistributedSampler padding and striding", "[unit][dist]") {
  const std::vector<int64_t> order = {7, 3, 9, 0, 4, 1, 8, 2, 6, 5};  // an epoch order of 10 examples
  // 3 replicas, no drop_last: num_samples = ceil(10/3) = 4, total 12, padded with order[0:2] = {7, 3}.
  CHECK(distributed_shard(order, 3, 0, false) == std::vector<int64_t>{7, 0, 8, 5});
  CHECK(distributed_shard(order, 3, 1, false) == std::vector<int64_t>{3, 4, 2, 7});
  CHECK(distributed_shard(order, 3, 2, false) == std::vector<int64_t>{9, 1, 6, 3});
  // drop_last: num_samples = ceil((10-3)/3) = 3, total 9: the tail {5} is dropped.
  CHECK(distributed_shard(order, 3, 0, true) == std::vector<int64_t>{7, 0, 8});
  CHECK(distributed_shard(order, 3, 2, true) == std::vector<int64_t>{9, 1, 6});
  // Padding longer than the order repeats it (torch: indices * ceil(padding / len)).
  CHECK(distributed_shard({4, 1}, 5, 4, false) == std::vector<int64_t>{4});
  CHECK(distributed_shard({4, 1}, 5, 3, false) == std::vector<int64_t>{1});
  // Divisible case: the ranks' shards are disjoint and cover the epoch.
  std::set<int64_t> seen;
  for (int r = 0; r < 2; ++r)
    for (auto i : distributed_shard(order, 2, r, false)) CHECK(seen.insert(i).second);
  CHECK(seen.size() == order.size());
  CHECK_THROWS_AS(distributed_shard(order, 2, 2, false), RuntimeFailure);
}

TEST_CASE("partition layout pads each group to alignment * world size and splits it evenly", "[unit][dist]") {
  PartitionMap::GroupInput decay{{"a.weight", "b.weight"}, {{3, 5}, {7}}, {0, 2}, 0.1};
  PartitionMap::GroupInput no_decay{{"a.bias"}, {{5}}, {1}, 0.0};
  PartitionMap map = PartitionMap::build({decay, no_decay}, 3);
  REQUIRE(map.groups.size() == 2);
  const FlatGroupInfo& g0 = map.groups[0];
  CHECK(g0.numel == 22);
  CHECK(g0.padded_numel == 24);  // next multiple of 2 * 3
  CHECK(g0.partition_size == 8);
  CHECK(g0.params[1].offset == 15);
  CHECK(g0.partition_real(0) == 8);
  CHECK(g0.partition_real(2) == 6);  // padding sits on the last rank
  const FlatGroupInfo& g1 = map.groups[1];
  CHECK(g1.padded_numel == 6);
  CHECK(g1.partition_size == 2);
  CHECK(g1.partition_real(2) == 1);
  CHECK(map.partition_numel(0) == 10);
  // The JSON form round-trips and is validated.
  PartitionMap back = PartitionMap::from_json(map.to_json(), "test");
  CHECK(back.to_json() == map.to_json());
  nlohmann::json broken = map.to_json();
  broken["groups"][0]["params"][1]["offset"] = 14;
  CHECK_THROWS_WITH(PartitionMap::from_json(broken, "shard.safetensors"), Catch::Contains("shard.safetensors"));
  CHECK(overlap(0, 10, 8, 16) == 2);
  CHECK(overlap(0, 8, 8, 16) == 0);
}

TEST_CASE("partition groups held by a subset of ranks are split among their holders only", "[unit][dist][partition]") {
  PartitionMap::GroupInput dense{{"a.weight"}, {{3, 5}}, {0}, 0.1, {}};
  PartitionMap::GroupInput expert0{{"e0.w", "e0.b"}, {{4, 3}, {3}}, {1, 2}, 0.1, {0, 2}};
  PartitionMap::GroupInput expert1{{"e1.w", "e1.b"}, {{4, 3}, {3}}, {3, 4}, 0.1, {1, 3}};
  const PartitionMap map = PartitionMap::build({dense, expert0, expert1}, 4);
  const FlatGroupInfo& d = map.groups[0];
  CHECK(d.ranks == std::vector<int>{0, 1, 2, 3});  // an ordinary group lists every rank in memory
  CHECK(d.padded_numel == 16);
  CHECK(d.partition_size == 4);
  const FlatGroupInfo& e = map.groups[1];
  CHECK(e.holders() == 2);
  CHECK(e.numel == 15);
  CHECK(e.padded_numel == 16);  // a multiple of 2 * 2 holders
  CHECK(e.partition_size == 8);
  CHECK(e.member(2) == 1);
  CHECK(e.member(1) == -1);
  CHECK_FALSE(e.held_by(3));
  CHECK(e.partition_begin(2) == 8);
  CHECK(e.partition_real(0) == 8);
  CHECK(e.partition_real(2) == 7);  // the padding sits on the last holder
  CHECK(e.partition_begin(1) == 0);
  CHECK(e.partition_numel(1) == 0);
  CHECK(e.partition_real(1) == 0);
  CHECK(map.groups[2].partition_begin(3) == 8);
  for (int r = 0; r < 4; ++r) CHECK(map.partition_numel(r) == 4 + 8);

  const nlohmann::json j = map.to_json();
  CHECK_FALSE(j["groups"][0].contains("ranks"));
  CHECK(j["groups"][1]["ranks"] == nlohmann::json::array({0, 2}));
  const PartitionMap back = PartitionMap::from_json(j, "test");
  CHECK(back.to_json() == j);
  CHECK(back.groups[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(back.groups[2].ranks == std::vector<int>{1, 3});
  // A map without such groups is written exactly as before they existed.
  CHECK(PartitionMap::build({{{"x"}, {{3}}, {0}, 0.0, {}}}, 2).to_json().dump() ==
        R"({"alignment":2,"groups":[{"numel":3,"padded_numel":4,"params":[{"model_index":0,"name":"x","numel":3,)"
        R"("offset":0,"shape":[3]}],"partition_size":2,"weight_decay":0.0}],"world_size":2})");

  for (const std::vector<int>& bad : std::vector<std::vector<int>>{{2, 0}, {0, 0}, {0, 4}, {-1, 1}}) {
    PartitionMap::GroupInput in = expert0;
    in.ranks = bad;
    CHECK_THROWS_AS(PartitionMap::build({dense, in}, 4), RuntimeFailure);
    CHECK_THROWS_WITH(PartitionMap::build({dense, in}, 4), Catch::Contains("group 1"));
    nlohmann::json broken = j;
    broken["groups"][1]["ranks"] = bad;
    CHECK_THROWS_WITH(PartitionMap::from_json(broken, "shard.safetensors"),
                      Catch::Contains("'shard.safetensors'") && Catch::Contains("group 1's \"ranks\""));
  }
  nlohmann::json nobody = j;
  nobody["groups"][2]["ranks"] = nlohmann::json::array();
  CHECK_THROWS_WITH(PartitionMap::from_json(nobody, "shard.safetensors"), Catch::Contains("group 2's \"ranks\" lists no rank"));
  nlohmann::json three = j;  // 16 elements cannot be split evenly into aligned partitions of 3 holders
  three["groups"][1]["ranks"] = {0, 1, 2};
  CHECK_THROWS_WITH(PartitionMap::from_json(three, "shard.safetensors"),
                    Catch::Contains("'shard.safetensors'") && Catch::Contains("padded_numel / partition_size in group 1"));
}

TEST_CASE("max shard sizes use HF's units", "[unit][dist]") {
  CHECK(parse_size("5GB") == 5000000000ull);
  CHECK(parse_size("2GiB") == 2147483648ull);
  CHECK(parse_size("500MB") == 500000000ull);
  CHECK(parse_size("10KiB") == 10240ull);
  CHECK(parse_size("1234") == 1234ull);
  CHECK_THROWS_AS(parse_size("lots"), ConfigError);
  CHECK_THROWS_AS(parse_size("-1MB"), ConfigError);
}
