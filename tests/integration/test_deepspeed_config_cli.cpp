// training.deepspeed through the real binary: the HF docs' ZeRO-2 config trains exactly as the same
// settings written in hftrain's own sections, the ZeRO-3 config trains on two workers, and both runs
// leave ds_config.resolved.json with every "auto" filled by the value the run used.
#include <catch2/catch.hpp>

#include "../ds_doc_configs.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
using json = nlohmann::json;

TEST_CASE("the HF docs' ZeRO-2 config trains as the same settings written natively", "[integration][deepspeed]") {
  const std::string dir = dist_dir("ds_zero2");
  write_text(dir + "/ds_config_zero2.json", kZero2);
  write_text(dir + "/ds.yaml", dist_spec(4, "  deepspeed: ds_config_zero2.json\n"));
  // The same run in hftrain's sections: stage 2, WarmupLR from 0 to learning_rate, the 2e8-element bucket.
  write_text(dir + "/native.yaml", dist_spec(4) + "zero: {stage: 2}\nscheduler: {type: WarmupLR}\n"
                                       "distributed: {ddp_bucket_cap_mb: 762.939453125}\n");  // 2e8 x 4 bytes / 2^20
  CliResult ds = run_hftrain("train ds.yaml --set training.output_dir=ds", dir);
  INFO(ds.output);
  REQUIRE(ds.exit_code == 0);
  CHECK_THAT(ds.output, Catch::Contains("DeepSpeed zero_optimization.overlap_comm: accepted, no effect here"));
  CHECK_THAT(ds.output, Catch::Contains("zero.offload_optimizer cpu: this build runs on the CPU"));
  CliResult native = run_hftrain("train native.yaml --set training.output_dir=native", dir);
  INFO(native.output);
  REQUIRE(native.exit_code == 0);
  const auto got = train_logs(dir + "/ds/trainer_state.json"), want = train_logs(dir + "/native/trainer_state.json");
  REQUIRE(got.size() == 4);
  REQUIRE(want.size() == 4);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i]["loss"] == want[i]["loss"]);
    CHECK(got[i]["grad_norm"] == want[i]["grad_norm"]);
    CHECK(got[i]["learning_rate"] == want[i]["learning_rate"]);
  }
  const json resolved = json::parse(read_text(dir + "/ds/ds_config.resolved.json"));
  CHECK(resolved["train_batch_size"] == 12);  // 1 worker x 6 x 2
  CHECK(resolved["train_micro_batch_size_per_gpu"] == 6);
  CHECK(resolved["gradient_accumulation_steps"] == 2);
  CHECK(resolved["gradient_clipping"] == 1.0);
  CHECK(resolved["optimizer"]["params"]["lr"] == 0.003);
  CHECK(resolved["optimizer"]["params"]["weight_decay"] == 0.01);
  CHECK(resolved["scheduler"]["params"]["warmup_num_steps"] == 0);
  CHECK(resolved["fp16"]["enabled"] == false);
  CHECK(resolved["zero_optimization"]["reduce_bucket_size"] == 200000000);
  // --dump-config shows where the stage came from and the resolved config.
  CliResult dump = run_hftrain("train ds.yaml --dump-config", dir);
  CHECK_THAT(dump.output, Catch::Contains("stage: 2  # training.deepspeed zero_optimization.stage: 2 (ds_config_zero2.json:28:18)"));
  CHECK_THAT(dump.output, Catch::Contains("#       \"train_batch_size\": 12,"));
}

TEST_CASE("the HF docs' ZeRO-3 config trains on two workers with its 'auto' values filled", "[integration][deepspeed]") {
  const std::string dir = dist_dir("ds_zero3");
  write_text(dir + "/ds_config_zero3.json", kZero3);
  write_text(dir + "/spec.yaml", dist_spec(3, "  deepspeed: ds_config_zero3.json\n"));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("engine: zero stage 3, world size 2"));
  CHECK(train_logs(dir + "/out/trainer_state.json").size() == 3);
  const json resolved = json::parse(read_text(dir + "/out/ds_config.resolved.json"));
  CHECK(resolved["train_batch_size"] == 24);  // 2 workers x 6 x 2
  CHECK(resolved["zero_optimization"]["stage3_param_persistence_threshold"] == 160);  // 10 x n_embd 16
  CHECK(resolved["zero_optimization"]["stage3_prefetch_bucket_size"] == 230);         // 0.9 x 16^2
  CHECK(resolved["zero_optimization"]["reduce_bucket_size"] == 256);                  // 16^2
  CHECK(std::filesystem::exists(dir + "/out/model.safetensors"));
}
