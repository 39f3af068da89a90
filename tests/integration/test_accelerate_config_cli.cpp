// hftrain train --accelerate-config FILE through the real binary: a MULTI_GPU-style file with use_cpu
// starts two CPU workers on loopback that train exactly as --nproc-per-node 2 does; --dump-config shows
// the launch settings with their origin (command-line flags win); an unknown key and a
// deepspeed_config_file conflict exit 2 naming file:line and key.
#include <catch2/catch.hpp>

#include "test_dist_helpers.h"

using namespace hftrain_test;

namespace {

const char* const kCpuFile = R"(compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config: {}
distributed_type: MULTI_GPU
downcast_bf16: 'no'
fsdp_config: {}
gpu_ids: all
machine_rank: 0
main_process_ip: null
main_process_port: null
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
use_cpu: true
)";

}  // namespace

TEST_CASE("an Accelerate MULTI_GPU file with use_cpu trains two CPU workers as --nproc-per-node 2", "[integration][accelerate]") {
  const std::string dir = dist_dir("accelerate_cpu");
  write_text(dir + "/accelerate.yaml", kCpuFile);
  write_text(dir + "/spec.yaml", dist_spec(3));
  CliResult a = run_hftrain("train spec.yaml --accelerate-config accelerate.yaml --set training.output_dir=acc", dir);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("world size 2"));
  CHECK_THAT(a.output, Catch::Contains("accelerate config main_training_function: main accepted with no effect"));
  CliResult n = run_hftrain("train spec.yaml --nproc-per-node 2 --set training.use_cpu=true --set training.output_dir=native", dir);
  INFO(n.output);
  REQUIRE(n.exit_code == 0);
  const auto got = train_logs(dir + "/acc/trainer_state.json"), want = train_logs(dir + "/native/trainer_state.json");
  REQUIRE(got.size() == 3);
  REQUIRE(want.size() == 3);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i]["loss"] == want[i]["loss"]);
    CHECK(got[i]["grad_norm"] == want[i]["grad_norm"]);
  }
}

TEST_CASE("an Accelerate file's settings show in --dump-config with their origin and flags win", "[integration][accelerate]") {
  const std::string dir = dist_dir("accelerate_dump");
  write_text(dir + "/node1.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmachine_rank: 1\n"
                                  "main_process_ip: 10.0.0.1\nmain_process_port: 29555\nmixed_precision: bf16\n"
                                  "num_machines: 2\nnum_processes: 4\nuse_cpu: true\n");
  write_text(dir + "/spec.yaml", dist_spec(3) + "distributed: {accelerate_config: node1.yaml}\n");
  CliResult d = run_hftrain("train spec.yaml --dump-config --master-port 29600", dir);
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK_THAT(d.output, Catch::Contains("nproc_per_node: 2  # accelerate num_processes: 4 / num_machines 2 (node1.yaml:8:"));
  CHECK_THAT(d.output, Catch::Contains("bf16: true  # accelerate mixed_precision: bf16 (node1.yaml:6:"));
  CHECK_THAT(d.output, Catch::Contains("#   nnodes: 2  (accelerate num_machines: 2 (node1.yaml:7:"));
  CHECK_THAT(d.output, Catch::Contains("#   node_rank: 1  (accelerate machine_rank: 1 (node1.yaml:3:"));
  CHECK_THAT(d.output, Catch::Contains("#   master_addr: 10.0.0.1  (accelerate main_process_ip: 10.0.0.1"));
  CHECK_THAT(d.output, Catch::Contains("#   master_port: 29600  (--master-port on the command line)"));
}

TEST_CASE("an unknown Accelerate key and a deepspeed_config_file conflict exit 2 naming file:line and key", "[integration][accelerate]") {
  const std::string dir = dist_dir("accelerate_errors");
  write_text(dir + "/spec.yaml", dist_spec(3));
  write_text(dir + "/typo.yaml", std::string(kCpuFile) + "mixed_precison: bf16\n");
  CliResult t = run_hftrain("train spec.yaml --accelerate-config typo.yaml", dir);
  INFO(t.output);
  CHECK(t.exit_code == 2);
  CHECK_THAT(t.output, Catch::Contains("typo.yaml:18:1: mixed_precison: unknown key (did you mean 'mixed_precision'?"));
  write_text(dir + "/ds.json", "{\"zero_optimization\": {\"stage\": 2}}");
  write_text(dir + "/ds.yaml", "distributed_type: DEEPSPEED\nnum_processes: 2\nuse_cpu: true\ndeepspeed_config:\n"
                               "  deepspeed_config_file: ds.json\n  zero_stage: 2\n");
  CliResult c = run_hftrain("train spec.yaml --accelerate-config ds.yaml", dir);
  INFO(c.output);
  CHECK(c.exit_code == 2);
  CHECK_THAT(c.output, Catch::Contains("ds.yaml:6:15: deepspeed_config.zero_stage: set beside deepspeed_config_file"));
  CHECK(!std::filesystem::exists(dir + "/out"));
}
