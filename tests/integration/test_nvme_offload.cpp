// NVMe offload of the optimizer state (zero.offload_optimizer device nvme) through the real binary:
// bitwise the weights, losses and checkpoint shards of the same run without offload (stages 1, 2, 3; one
// and two workers; fp32 and bf16, where the fp32 master weights move to the swap file too), resume of
// offloaded runs, injected I/O errors stop the run naming the
// swap file and offset with earlier checkpoints intact, a stale swap directory is cleaned, bad paths are
// refused, DeepSpeed's config spelling works, and peak memory drops by most of the offloaded bytes.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peak_rss.h"
#include "test_dist_helpers.h"
#include "test_tensor_files.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string offload_args(const std::string& nvme) {
  return " --set zero.offload_optimizer.device=nvme --set zero.offload_optimizer.nvme_path=" + nvme +
         " --set zero.sub_group_size=300";
}

}  // namespace

TEST_CASE("nvme offload gives bitwise the run without it, and resumes exactly", "[integration][offload]") {
  const std::string dir = dist_dir("nvme_exact");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml", dist_spec(8, "  save_strategy: steps\n  save_steps: 4\n"));
  struct Case {
    int world, stage;
    bool bf16;
    const char* optimizer;
  };
  for (const Case& c : {Case{1, 1, false, "adamw"}, Case{2, 2, false, "adamw"}, Case{2, 1, true, "adamw"},
                        Case{2, 3, false, "adamw"}, Case{2, 2, true, "lion"}, Case{2, 3, true, "adamw"}}) {
    const std::string name = "w" + std::to_string(c.world) + "s" + std::to_string(c.stage) + (c.bf16 ? "bf16" : "") + c.optimizer;
    const std::string common = "train spec.yaml --nproc-per-node " + std::to_string(c.world) + " --set zero.stage=" +
                               std::to_string(c.stage) + " --set training.per_device_train_batch_size=" +
                               std::to_string(6 / c.world) + (c.bf16 ? " --set precision.bf16=true" : "") +
                               " --set optimizer.type=" + c.optimizer + " --set zero.stage3_param_persistence_threshold=20";
    CliResult ref = run_hftrain(common + " --set training.output_dir=" + name + "_ref", dir);
    REQUIRE(ref.exit_code == 0);
    CliResult off = run_hftrain(common + " --set training.output_dir=" + name + "_nvme" + offload_args("nvme"), dir);
    INFO(name << "\n" << off.output);
    REQUIRE(off.exit_code == 0);
    CHECK_THAT(off.output, Catch::Contains(c.bf16 ? "fp32 master weights and optimizer state offloaded to nvme"
                                                  : "; optimizer state offloaded to nvme") &&
                               Catch::Contains("sub-groups swapped to"));
    CHECK(train_logs(dir + "/" + name + "_nvme/trainer_state.json") == train_logs(dir + "/" + name + "_ref/trainer_state.json"));
    // (With bf16 the masters in the swap file are streamed to the model file, group by group.)
    CHECK(same_tensors(dir + "/" + name + "_nvme/model.safetensors", dir + "/" + name + "_ref/model.safetensors"));
    CHECK(same_tensors(dir + "/" + name + "_nvme/checkpoint-4/model.safetensors", dir + "/" + name + "_ref/checkpoint-4/model.safetensors"));
    for (int r = 0; r < c.world; ++r) {  // the checkpoint holds the complete state, read back from the swap file
      const std::string shard = "/checkpoint-4/global_step4/zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.safetensors";
      CHECK(read_bytes(dir + "/" + name + "_nvme" + shard) == read_bytes(dir + "/" + name + "_ref" + shard));
    }
    CHECK(fs::is_empty(dir + "/nvme"));  // swap files are part of the run, removed at exit
  }
  // Resume offloaded runs from step 4 (the swap file is written anew, masters included with bf16): steps
  // 5-8 and the weights as before.
  for (const std::string run : {"w2s2adamw", "w2s2bf16lion"}) {
    const bool bf16 = run.find("bf16") != std::string::npos;
    CliResult r = run_hftrain(std::string("train spec.yaml --nproc-per-node 2 --set zero.stage=2 --set training.per_device_train_batch_size=3 ") +
                                  (bf16 ? "--set precision.bf16=true --set optimizer.type=lion " : "") + "--set training.output_dir=resumed_" + run +
                                  " --resume " + run + "_nvme/checkpoint-4" + offload_args("nvme"),
                              dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(train_logs(dir + "/resumed_" + run + "/trainer_state.json") == train_logs(dir + "/" + run + "_ref/trainer_state.json"));
    CHECK(same_tensors(dir + "/resumed_" + run + "/model.safetensors", dir + "/" + run + "_ref/model.safetensors"));
  }
  fs::remove_all(dir);
}

TEST_CASE("ZeRO-3 offload_param nvme gathers the parameter shards from the swap files, bitwise the run without it", "[integration][offload]") {
  const std::string dir = dist_dir("nvme_params");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml", dist_spec(8, "  save_strategy: steps\n  save_steps: 4\n"));
  for (const auto& [world, bf16] : {std::pair{1, false}, std::pair{2, false}, std::pair{2, true}}) {
    const std::string name = "w" + std::to_string(world) + (bf16 ? "bf16" : "fp32");
    const std::string common = "train spec.yaml --nproc-per-node " + std::to_string(world) +
                               " --set zero.stage=3 --set training.per_device_train_batch_size=" + std::to_string(6 / world) +
                               (bf16 ? " --set precision.bf16=true" : "") + " --set zero.stage3_param_persistence_threshold=20";
    CliResult ref = run_hftrain(common + " --set training.output_dir=" + name + "_ref", dir);
    REQUIRE(ref.exit_code == 0);
    CliResult off = run_hftrain(common + " --set training.output_dir=" + name + "_nvme --set zero.offload_param=nvme" + offload_args("nvme"), dir);
    INFO(name << "\n" << off.output);
    REQUIRE(off.exit_code == 0);
    CHECK_THAT(off.output, Catch::Contains("; parameter shards, ") &&
                               Catch::Contains(bf16 ? "fp32 and 16-bit parameters and state in" : "fp32 parameters and state in"));
    CHECK(train_logs(dir + "/" + name + "_nvme/trainer_state.json") == train_logs(dir + "/" + name + "_ref/trainer_state.json"));
    CHECK(same_tensors(dir + "/" + name + "_nvme/model.safetensors", dir + "/" + name + "_ref/model.safetensors"));
    for (int r = 0; r < world; ++r) {
      const std::string shard = "/checkpoint-4/global_step4/zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.safetensors";
      CHECK(read_bytes(dir + "/" + name + "_nvme" + shard) == read_bytes(dir + "/" + name + "_ref" + shard));
    }
    // The shards moved: in memory only the groups that stay whole (the persistent ones) remain.
    const json ref_mem = engine_memory_report(ref.output).at("ranks").at(0), off_mem = engine_memory_report(off.output).at("ranks").at(0);
    CHECK(off_mem.at("param_offloaded_bytes").get<int64_t>() > 0);
    CHECK(off_mem.at("param_bytes").get<int64_t>() + off_mem.at("param_offloaded_bytes").get<int64_t>() ==
          ref_mem.at("param_bytes").get<int64_t>());
    CHECK(off_mem.at("master_offloaded_bytes").get<int64_t>() == (bf16 ? ref_mem.at("master_bytes").get<int64_t>() : 0));
    CHECK(fs::is_empty(dir + "/nvme"));
  }
  // Resume the bf16 run from step 4: the shards are written to the swap files anew.
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set training.per_device_train_batch_size=3 "
                            "--set precision.bf16=true --set zero.stage3_param_persistence_threshold=20 --set zero.offload_param=nvme "
                            "--set training.output_dir=resumed --resume w2bf16_nvme/checkpoint-4" + offload_args("nvme"),
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(train_logs(dir + "/resumed/trainer_state.json") == train_logs(dir + "/w2bf16_ref/trainer_state.json"));
  CHECK(same_tensors(dir + "/resumed/model.safetensors", dir + "/w2bf16_ref/model.safetensors"));
  // offload_param nvme needs the optimizer's swap files (and stage 3): exit 2 naming the key.
  r = run_hftrain("train spec.yaml --set zero.stage=3 --set zero.offload_param=nvme --set training.output_dir=never", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("zero.offload_param") && Catch::Contains("set zero.offload_optimizer.device nvme"));
  r = run_hftrain("train spec.yaml --set zero.stage=2 --set zero.offload_param=nvme --set training.output_dir=never" + offload_args("nvme"), dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("offloading parameters needs zero.stage 3"));
  CHECK_FALSE(fs::exists(dir + "/never"));
  fs::remove_all(dir);
}

TEST_CASE("nvme offload: I/O errors, stale swap files and bad paths", "[integration][offload]") {
  const std::string dir = dist_dir("nvme_faults");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml", dist_spec(12, "  save_strategy: steps\n  save_steps: 4\n"));
  const std::string base = "train spec.yaml --set zero.stage=1" + offload_args("nvme");

  // An I/O error mid-run (the 150th request: after the step-4 checkpoint) stops the run naming the swap
  // file and the offset; the earlier checkpoint stays complete.
  for (const char* fault : {"aio_eio:150", "aio_enospc:150"}) {
    const std::string out = std::string("out_") + (fault[4] == 'e' && fault[5] == 'i' ? "eio" : "enospc");
    CliResult r = run_shell("cd '" + dir + "' && HFTRAIN_FAULT_INJECT=" + fault + " '" + HFTRAIN_BINARY + "' " + base +
                            " --set training.output_dir=" + out + " 2>&1");
    INFO(fault << "\n" << r.output);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains("swap file '") && Catch::Contains("optimizer_state.swap': ") &&
                             Catch::Contains("bytes at offset") &&
                             Catch::Contains(fault[5] == 'i' ? "Input/output error" : "No space left on device"));
    CHECK(run_hftrain("checkpoint inspect " + out + "/checkpoint-4", dir).exit_code == 0);
    CHECK_FALSE(fs::exists(dir + "/" + out + "/checkpoint-12"));
  }

  // A swap directory left by a killed run is removed with a message.
  fs::create_directories(dir + "/nvme/hftrain-swap-rank0");
  write_text(dir + "/nvme/hftrain-swap-rank0/owner.pid", "999999999\n");
  write_text(dir + "/nvme/hftrain-swap-rank0/optimizer_state.swap", "stale");
  CliResult r = run_hftrain(base + " --set training.max_steps=2 --set training.output_dir=stale", dir);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("removing the stale swap directory"));
  CHECK(fs::is_empty(dir + "/nvme"));

  // Too little free space for this rank's state (the filesystem's figure injected): exit 2 before the
  // first step, naming the key and both sizes; the swap directory is removed again.
  r = run_shell("cd '" + dir + "' && HFTRAIN_FAULT_INJECT=swap_free_bytes:4096 '" + HFTRAIN_BINARY + "' " + base +
                " --set training.output_dir=full 2>&1");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("zero.offload_optimizer.nvme_path: ") && Catch::Contains(" for this rank's optimizer state") &&
                           Catch::Contains("its filesystem has 4096 bytes (0 MiB) free"));
  CHECK(r.output.find("step 1/") == std::string::npos);
  CHECK(fs::is_empty(dir + "/nvme"));

  // A missing nvme_path: exit 2 naming the key, nothing written.
  r = run_hftrain("train spec.yaml --set zero.stage=1 --set zero.offload_optimizer.device=nvme "
                  "--set zero.offload_optimizer.nvme_path=missing --set training.output_dir=never",
                  dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("zero.offload_optimizer.nvme_path") && Catch::Contains("'missing' is not an existing directory"));
  CHECK_FALSE(fs::exists(dir + "/never"));
  r = run_hftrain("train spec.yaml --set zero.stage=1 --set zero.offload_optimizer=nvme --set training.output_dir=never", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("device nvme needs nvme_path"));
  fs::remove_all(dir);
}

TEST_CASE("nvme offload from a DeepSpeed config", "[integration][offload]") {
  const std::string dir = dist_dir("nvme_ds_config");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml", dist_spec(4) + "  deepspeed: ds.json\n");
  write_text(dir + "/ds.json", R"({
  "zero_optimization": {"stage": 2, "sub_group_size": 500,
    "offload_optimizer": {"device": "nvme", "nvme_path": "nvme", "pin_memory": true, "buffer_count": 5, "fast_init": false}},
  "aio": {"block_size": 262144, "queue_depth": 4, "thread_count": 1, "single_submit": false, "overlap_events": true},
  "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"
})");
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set training.per_device_train_batch_size=3", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("optimizer state offloaded to nvme") && Catch::Contains("5 buffers"));
  CHECK_THAT(r.output, Catch::Contains("DeepSpeed zero_optimization.offload_optimizer.pin_memory: accepted, no effect here"));
  r = run_hftrain("train spec.yaml --dump-config", dir);
  CHECK_THAT(r.output, Catch::Contains("block_size: 262144") && Catch::Contains("sub_group_size: 500"));
  fs::remove_all(dir);
}

TEST_CASE("nvme offload lowers peak memory by most of the offloaded state and masters", "[integration][offload][slow]") {
  // A 19.7 M-parameter gpt whose Adam state (158 MB) is most of what stage 1 on one worker holds; peak RSS
  // of three steps with and without offload, measured by the kernel (wait4) side by side, in fp32 and bf16.
  // (Without peak_rss.h's fixed threshold a CI machine measured 0.68 of state and masters in bf16, the development
  // one 0.86; with it the development machine measures 0.87.)
  const std::string dir = dist_dir("nvme_rss");
  fs::create_directories(dir + "/nvme");
  write_text(dir + "/spec.yaml",
             "model: {type: gpt, n_layer: 4, n_head: 8, n_embd: 640}\n"
             "data: {type: digit_reversal, num_digits: 3, train_size: 16, eval_size: 0, test_size: 0}\n"
             "training: {output_dir: out, per_device_train_batch_size: 2, max_steps: 3, save_strategy: \"no\", "
             "logging_steps: 1}\nzero: {stage: 1}\n");
  const PeakRssEnvironment environment;
  auto run = [&](const std::string& out_dir, const std::string& extra, std::string& output) {
    const std::string log = dir + "/log.txt";
    const std::string cmd = std::string("exec '") + HFTRAIN_BINARY + "' train spec.yaml --set training.overwrite_output_dir=true --set training.output_dir=" + out_dir + extra;
    pid_t pid = ::fork();
    if (pid == 0) {  // no allocation from here on
      if (::chdir(dir.c_str()) != 0) ::_exit(125);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execle("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr, environment.envp());
      ::_exit(127);
    }
    int status = 0;
    struct rusage ru {};
    REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
    output = read_text(log);
    INFO(output);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return static_cast<double>(ru.ru_maxrss) * 1024.0;
  };
  // bf16: the fp32 master weights (79 MB) move to the swap file too.
  for (const std::string precision : {"", " --set precision.bf16=true"}) {
    std::string plain_out, offload_out;
    const double plain = run("plain", precision, plain_out);
    const double offloaded = run("offloaded", precision + " --set zero.offload_optimizer.device=nvme --set "
                                 "zero.offload_optimizer.nvme_path=nvme --set zero.sub_group_size=100000",
                                 offload_out);
    const json report = engine_memory_report(offload_out).at("ranks").at(0);
    const double state = report.at("optimizer_state_offloaded_bytes").get<double>();
    const double masters = report.at("master_offloaded_bytes").get<double>();
    INFO((precision.empty() ? "fp32" : "bf16") << ": peak RSS " << plain / (1 << 20) << " MiB -> " << offloaded / (1 << 20)
                                               << " MiB; offloaded " << state / (1 << 20) << " MiB of state and " << masters / (1 << 20)
                                               << " MiB of masters, in-memory buffers "
                                               << report.at("optimizer_state_bytes").get<double>() / (1 << 20) << " MiB");
    CHECK(state >= 150e6);
    CHECK(masters == (precision.empty() ? 0 : 19706880.0 * 4));
    // Most of it: the peak of the offloaded run can fall in forward / backward, whose temporaries follow the
    // CPU's matmul path.
    CHECK(plain - offloaded >= 0.6 * (state + masters));
  }
  fs::remove_all(dir);
}
