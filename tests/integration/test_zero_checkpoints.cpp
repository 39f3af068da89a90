// ZeRO checkpoints through the real binary: every rank's shard lands in checkpoint-N/global_stepN/ with a
// `latest` file; resuming at the same world size continues bit for bit, and on another world size (stage
// and stage) from the state re-partitioned for it; `hftrain zero-to-fp32` rebuilds
// exactly the fp32 weights the engine held (the checkpoint's own model.safetensors, written from the
// full parameters), splits large outputs HF-style, streams with flat memory, and names the file at
// fault for a missing shard, a truncated file or shards from different checkpoints.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>

#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "peak_rss.h"
#include "test_dist_helpers.h"
#include "test_tensor_files.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A ZeRO run with checkpoints at steps 6 and 12.
// Stage 3 partitions the matrices (persistence threshold 20) and keeps the 16-element vectors whole.
std::string train_with_checkpoints(const std::string& name, int stage, int world) {
  const std::string dir = dist_dir(name);
  write_text(dir + "/spec.yaml", dist_spec(12, "  save_strategy: steps\n  save_steps: 6\n"));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(world) + " --set zero.stage=" +
                                std::to_string(stage) + " --set training.per_device_train_batch_size=" +
                                std::to_string(6 / world) +
                                (stage == 3 ? " --set zero.stage3_param_persistence_threshold=20" : ""),
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}


// Steps 7-12 and the final weights of the run resumed into `resumed` equal the uninterrupted run's (out/).
void check_resumed_equals_full_run(const std::string& dir, const std::string& resumed) {
  const auto full = train_logs(dir + "/out/trainer_state.json");
  const auto got = train_logs(dir + "/" + resumed + "/trainer_state.json");
  REQUIRE(full.size() == 12);
  REQUIRE(got.size() == 12);
  for (std::size_t i = 6; i < 12; ++i) CHECK(got[i] == full[i]);  // loss, grad_norm, lr, epoch: identical
  CHECK(read_bytes(dir + "/" + resumed + "/model.safetensors") == read_bytes(dir + "/out/model.safetensors"));
}

// Steps 7-12 of a run resumed on another layout follow the uninterrupted run (out/) within the tolerance of
// the stage-equivalence test (the reductions add in another order).
void check_continuation_close(const std::vector<json>& full, const std::vector<json>& got) {
  REQUIRE(full.size() == 12);
  REQUIRE(got.size() == 12);
  for (std::size_t i = 6; i < 12; ++i) {
    INFO("step " << got[i]["step"]);
    const double want_loss = full[i]["loss"], loss = got[i]["loss"];
    CHECK(std::abs(loss - want_loss) <= 5e-5 + 1e-5 * std::abs(want_loss));
    const double want_norm = full[i]["grad_norm"], norm = got[i]["grad_norm"];
    CHECK(std::abs(norm - want_norm) <= 1e-5 * std::abs(want_norm));
    CHECK(got[i]["learning_rate"] == full[i]["learning_rate"]);
    CHECK(got[i]["epoch"] == full[i]["epoch"]);
  }
}

}  // namespace

TEST_CASE("ZeRO checkpoints hold one shard per rank and resume exactly at the same world size", "[integration][zero]") {
  const std::string dir = train_with_checkpoints("zero_resume", 2, 2);
  const std::string ckpt = dir + "/out/checkpoint-6";
  CHECK(read_text(ckpt + "/latest") == "global_step6");
  for (const char* f : {"global_step6/zero_pp_rank_0_mp_rank_00_optim_states.safetensors",
                        "global_step6/zero_pp_rank_1_mp_rank_00_optim_states.safetensors",
                        "global_step6/mp_rank_00_model_states.safetensors", "rng_state_0.safetensors",
                        "rng_state_1.safetensors"}) {
    CHECK(fs::exists(ckpt + "/" + f));
    CHECK(read_text(ckpt + "/manifest.json").find(f) != std::string::npos);  // part of the atomic commit
  }
  CHECK_FALSE(fs::exists(ckpt + "/optimizer.safetensors"));  // the optimizer state lives in the shards
  auto shard = hftrain::load_safetensors(ckpt + "/global_step6/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  CHECK(shard.metadata.at("world_size") == "2");
  CHECK(shard.metadata.at("zero_stage") == "2");
  CHECK(shard.tensors.count("fp32_flat_group_0") == 1);
  CHECK(shard.tensors.count("optimizer_state.flat_group_0.exp_avg") == 1);

  // Resume from step 6 in a fresh output_dir: steps 7-12 and the final weights equal the uninterrupted run's.
  fs::create_directories(dir + "/resumed");
  fs::copy(ckpt, dir + "/resumed/checkpoint-6", fs::copy_options::recursive);
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=2 --set training.per_device_train_batch_size=3 "
                            "--set training.output_dir=resumed --resume resumed/checkpoint-6",
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_resumed_equals_full_run(dir, "resumed");
  CHECK(read_bytes(dir + "/resumed/checkpoint-12/global_step12/zero_pp_rank_1_mp_rank_00_optim_states.safetensors") ==
        read_bytes(dir + "/out/checkpoint-12/global_step12/zero_pp_rank_1_mp_rank_00_optim_states.safetensors"));

  fs::remove_all(dir);
}

TEST_CASE("ZeRO shards resume on another number of workers and at any stage, re-partitioned", "[integration][zero]") {
  const std::string dir = train_with_checkpoints("zero_universal", 2, 2);
  const auto full = train_logs(dir + "/out/trainer_state.json");
  // The same global batch (6 x 2 accumulation) on 3 workers at stage 1, 1 worker at stage 2, 1 worker at stage 0
  // and 2 workers at stage 3: steps 7-12 follow the uninterrupted 2-worker stage-2 run within the
  // stage-equivalence tolerance (reductions add in another order).
  for (const auto& [world, stage] : std::vector<std::pair<int, int>>{{3, 1}, {1, 2}, {1, 0}, {2, 3}}) {
    const std::string out = "w" + std::to_string(world) + "_s" + std::to_string(stage);
    CliResult r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(world) + " --set zero.stage=" +
                                  std::to_string(stage) + " --set training.per_device_train_batch_size=" +
                                  std::to_string(6 / world) + " --set training.output_dir=" + out +
                                  (stage == 3 ? " --set zero.stage3_param_persistence_threshold=20" : "") +
                                  " --resume out/checkpoint-6",
                              dir);
    INFO(out << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    const std::string workers = world == 1 ? "1 worker" : std::to_string(world) + " workers";
    CHECK_THAT(r.output, Catch::Contains(stage == 0 ? "consolidating the optimizer state of 2 workers at ZeRO stage 2 (fp32) for stage 0"
                                                    : "re-partitioning the training state of 2 workers at ZeRO stage 2 (fp32) for " +
                                                          workers));
    CHECK_THAT(r.output, Catch::Contains("resuming a checkpoint of 2 workers at stage 2 as " + workers + " at stage " +
                                         std::to_string(stage) + ": global batch 12 -> 12"));
    check_continuation_close(full, train_logs(dir + "/" + out + "/trainer_state.json"));
  }
  // The re-partitioned fp32 masters are the saved ones bit for bit: resumed on 3 workers with nothing left to
  // train, the final weights (rebuilt from the new partitions) equal the checkpoint's model.
  CliResult same = run_hftrain("train spec.yaml --nproc-per-node 3 --set zero.stage=1 --set training.per_device_train_batch_size=2 "
                               "--set training.max_steps=6 --set training.output_dir=w3_at6 --resume out/checkpoint-6",
                               dir);
  INFO(same.output);
  REQUIRE(same.exit_code == 0);
  const auto saved = hftrain::load_safetensors(dir + "/out/checkpoint-6/model.safetensors");
  const auto rebuilt = hftrain::load_safetensors(dir + "/w3_at6/model.safetensors");
  REQUIRE(saved.tensors.size() == rebuilt.tensors.size());
  for (const auto& [name, t] : saved.tensors) {
    INFO(name);
    REQUIRE(rebuilt.tensors.count(name) == 1);
    CHECK(torch::equal(rebuilt.tensors.at(name), t));
  }
  fs::remove_all(dir);
}

TEST_CASE("ZeRO-3 checkpoints resume exactly, at stages 2 and 0, and on another world size", "[integration][zero][zero3]") {
  const std::string dir = train_with_checkpoints("zero3_resume", 3, 2);
  const std::string ckpt = dir + "/out/checkpoint-6";
  auto shard = hftrain::load_safetensors(ckpt + "/global_step6/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  CHECK(shard.metadata.at("zero_stage") == "3");
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set training.per_device_train_batch_size=3 "
                            "--set zero.stage3_param_persistence_threshold=20 --set training.output_dir=resumed "
                            "--resume out/checkpoint-6",
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_resumed_equals_full_run(dir, "resumed");

  // Stage 2 on 2 workers and stage 0 on one from the stage-3 shards (another partition map, cut by name).
  for (const auto& [world, stage] : std::vector<std::pair<int, int>>{{2, 2}, {1, 0}}) {
    const std::string out = "w" + std::to_string(world) + "_s" + std::to_string(stage);
    r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(world) + " --set zero.stage=" +
                        std::to_string(stage) + " --set training.per_device_train_batch_size=" + std::to_string(6 / world) +
                        " --set training.output_dir=" + out + " --resume out/checkpoint-6",
                    dir);
    INFO(out << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    check_continuation_close(train_logs(dir + "/out/trainer_state.json"), train_logs(dir + "/" + out + "/trainer_state.json"));
  }

  // Stage 3 on 3 workers from the 2-worker shards: re-partitioned, and steps 7-12 follow the uninterrupted run.
  r = run_hftrain("train spec.yaml --nproc-per-node 3 --set zero.stage=3 --set training.per_device_train_batch_size=2 "
                  "--set zero.stage3_param_persistence_threshold=20 --set training.output_dir=w3 --resume out/checkpoint-6",
                  dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("re-partitioning the training state of 2 workers at ZeRO stage 3 (fp32) for 3 workers"));
  check_continuation_close(train_logs(dir + "/out/trainer_state.json"), train_logs(dir + "/w3/trainer_state.json"));
  fs::remove_all(dir);
}

TEST_CASE("zero-to-fp32 rebuilds the engine's fp32 weights bit for bit", "[integration][zero]") {
  for (auto [stage, world] : {std::pair<int, int>{1, 3}, {2, 2}, {3, 3}}) {
    INFO("stage " << stage << ", world size " << world);
    const std::string dir = train_with_checkpoints("zero_fp32_" + std::to_string(stage), stage, world);
    CliResult r = run_hftrain("zero-to-fp32 out/checkpoint-12 fp32", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("peak RSS") != std::string::npos);
    // The tensors of model.safetensors, which rank 0 wrote from the engine's gathered parameters.
    CHECK(same_tensors(dir + "/fp32/model.safetensors", dir + "/out/checkpoint-12/model.safetensors"));
    CHECK(json::parse(read_text(dir + "/fp32/config.json")) == json::parse(read_text(dir + "/out/checkpoint-12/config.json")));
    // The default output sits beside the checkpoint (not inside it, not matched by checkpoint rotation).
    r = run_hftrain("zero-to-fp32 out/checkpoint-6", dir);
    REQUIRE(r.exit_code == 0);
    CHECK(same_tensors(dir + "/out/fp32-checkpoint-6/model.safetensors", dir + "/out/checkpoint-6/model.safetensors"));

    // Split output: every file under the limit (unless one tensor alone is larger), the index maps each
    // tensor to its file, and the tensors equal the unsplit ones.
    r = run_hftrain("zero-to-fp32 out/checkpoint-12 split --max-shard-size 3KB", dir);
    REQUIRE(r.exit_code == 0);
    const json index = json::parse(read_text(dir + "/split/model.safetensors.index.json"));
    const auto whole = hftrain::load_safetensors(dir + "/fp32/model.safetensors").tensors;
    int64_t total = 0;
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      files.insert(file.get<std::string>());
      auto part = hftrain::load_safetensors(dir + "/split/" + file.get<std::string>()).tensors;
      REQUIRE(part.count(name) == 1);
      CHECK(torch::equal(part.at(name), whole.at(name)));
      total += static_cast<int64_t>(part.at(name).nbytes());
    }
    CHECK(index["weight_map"].size() == whole.size());
    CHECK(index["metadata"]["total_size"] == total);
    CHECK(files.size() > 2);
    CHECK(files.count("model-00001-of-" + std::string(5 - std::to_string(files.size()).size(), '0') +
                      std::to_string(files.size()) + ".safetensors") == 1);
    CHECK_FALSE(fs::exists(dir + "/split/model.safetensors"));
    fs::remove_all(dir);
  }
}

TEST_CASE("zero-to-fp32 names the file at fault", "[integration][zero]") {
  const std::string dir = train_with_checkpoints("zero_fp32_errors", 1, 3);
  // Messages name the files as the user gave the directory (relative to the run directory here).
  const std::string rel = "out/checkpoint-12/global_step12/zero_pp_rank_1_mp_rank_00_optim_states.safetensors";
  const std::string shard1 = dir + "/" + rel;
  const std::string saved = read_bytes(shard1);

  // A missing shard.
  fs::rename(shard1, shard1 + ".away");
  CliResult r = run_hftrain("zero-to-fp32 out/checkpoint-12 x", dir);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("missing ZeRO shard '" + rel + "'") != std::string::npos);
  fs::rename(shard1 + ".away", shard1);

  // A truncated shard.
  fs::resize_file(shard1, saved.size() - 100);
  r = run_hftrain("zero-to-fp32 out/checkpoint-12 x", dir);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("'" + rel + "': truncated") != std::string::npos);

  // A shard from another checkpoint (same layout, other step).
  fs::copy_file(dir + "/out/checkpoint-6/global_step6/zero_pp_rank_1_mp_rank_00_optim_states.safetensors", shard1,
                fs::copy_options::overwrite_existing);
  r = run_hftrain("zero-to-fp32 out/checkpoint-12 x", dir);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("'" + rel + "': global_step 6 disagrees") != std::string::npos);

  // A shard of a different world size.
  write_text(shard1, saved);
  auto other = hftrain::load_safetensors(shard1);
  other.metadata["world_size"] = "4";
  hftrain::NamedTensors tensors(other.tensors.begin(), other.tensors.end());
  hftrain::save_safetensors(shard1, tensors, other.metadata);
  r = run_hftrain("zero-to-fp32 out/checkpoint-12 x", dir);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("'" + rel + "': metadata world_size 4 disagrees") != std::string::npos);

  // A stage-0 checkpoint has nothing to convert.
  r = run_hftrain("train spec.yaml --set training.output_dir=plain --set training.max_steps=6", dir);
  REQUIRE(r.exit_code == 0);
  r = run_hftrain("zero-to-fp32 plain/checkpoint-6 x", dir);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("already holds the full fp32 weights") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/x/model.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("zero-to-fp32 streams: peak memory stays under 1.2x the output size", "[integration][zero]") {
  // A synthetic 3-rank checkpoint of ~192 MiB, laid out by the documented partition rule, with values
  // the test knows; the conversion's peak RSS is measured by the kernel (wait4). Stage 2: one flat group;
  // stage 3: a flat group per gather unit (here two).
  const int stage = GENERATE(2, 3);
  INFO("stage " << stage);
  const std::string dir = dist_dir("zero_fp32_rss_" + std::to_string(stage));
  // Fork the converter now, before this process grows: the kernel's peak RSS of a child includes the
  // image it was forked from. It waits on a pipe until the checkpoint exists.
  const std::string out = dir + "/fp32", checkpoint = dir + "/ckpt";
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const PeakRssEnvironment environment;
  pid_t pid = ::fork();
  if (pid == 0) {  // no allocation from here on
    ::close(go[1]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1 || c != 'x') ::_exit(126);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::execle(HFTRAIN_BINARY, HFTRAIN_BINARY, "zero-to-fp32", checkpoint.c_str(), out.c_str(), (char*)nullptr,
             environment.envp());
    ::_exit(127);
  }
  ::close(go[0]);
  const std::string tag = dir + "/ckpt/global_step1";
  fs::create_directories(tag);
  write_text(dir + "/ckpt/latest", "global_step1");
  const int world = 3;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> params = {
      {"a.weight", {4096, 4096}}, {"b.weight", {4096, 4097}}, {"c.weight", {3000, 5000}}, {"d.bias", {77}}};
  std::vector<hftrain::PartitionMap::GroupInput> groups(stage == 3 ? 2 : 1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& group = groups[stage == 3 && i >= 2 ? 1 : 0];
    group.names.push_back(params[i].first);
    group.shapes.push_back(params[i].second);
    group.model_index.push_back(static_cast<int64_t>(i));
  }
  const auto map = hftrain::PartitionMap::build(groups, world);
  torch::manual_seed(3);
  std::vector<torch::Tensor> flats;
  for (const auto& g : map.groups) flats.push_back(torch::randn({g.numel}));
  uint64_t output_bytes = 0;
  for (const auto& p : params) output_bytes += 4 * static_cast<uint64_t>(torch::empty(p.second).numel());
  for (int r = 0; r < world; ++r) {
    hftrain::NamedTensors parts;
    for (std::size_t k = 0; k < map.groups.size(); ++k) {
      const auto& g = map.groups[k];
      parts.emplace_back("fp32_flat_group_" + std::to_string(k), flats[k].narrow(0, g.partition_begin(r), g.partition_real(r)).clone());
    }
    hftrain::save_safetensors(tag + "/zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.safetensors", parts,
                              {{"format", "hftrain-zero-shard"}, {"zero_stage", std::to_string(stage)}, {"rank", std::to_string(r)},
                               {"world_size", std::to_string(world)}, {"global_step", "1"},
                               {"partition", map.to_json().dump()}});
    parts.clear();
  }
  json order = json::array();
  for (const auto& p : params) order.push_back(p.first);
  hftrain::save_safetensors(tag + "/mp_rank_00_model_states.safetensors", {},
                            {{"format", "hftrain-zero-model-states"}, {"tensor_order", order.dump()},
                             {"zero_stage", std::to_string(stage)}, {"world_size", std::to_string(world)}, {"global_step", "1"}});

  REQUIRE(::write(go[1], "x", 1) == 1);
  ::close(go[1]);
  int status = 0;
  struct rusage ru {};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const double peak = static_cast<double>(ru.ru_maxrss) * 1024.0;
  INFO("peak RSS " << peak / (1 << 20) << " MiB for an output of " << output_bytes / (1 << 20) << " MiB");
  CHECK(peak <= 1.2 * static_cast<double>(output_bytes));

  auto got = hftrain::load_safetensors(out + "/model.safetensors").tensors;
  for (std::size_t k = 0; k < map.groups.size(); ++k)
    for (const auto& at : map.groups[k].params) CHECK(torch::equal(got.at(at.name), flats[k].narrow(0, at.offset, at.numel).view(at.shape)));
  CHECK(got.size() == params.size());
  fs::remove_all(dir);
}

TEST_CASE("ZeRO-3 writes the final model from the shards, or only the shards when asked", "[integration][zero3]") {
  const std::string dir = dist_dir("zero3_final_save");
  write_text(dir + "/spec.yaml", dist_spec(4));
  const std::string args = "train spec.yaml --nproc-per-node 3 --set zero.stage=3 --set training.per_device_train_batch_size=2 "
                           "--set zero.stage3_param_persistence_threshold=20";
  CliResult r = run_hftrain(args, dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("model saved to out/model.safetensors"));

  // Shards only: a final checkpoint instead of model.safetensors, and the command that consolidates it.
  r = run_hftrain(args + " --set training.output_dir=shards --set zero.stage3_gather_16bit_weights_on_model_save=false", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir + "/shards/model.safetensors"));
  CHECK(fs::exists(dir + "/shards/checkpoint-4/global_step4/zero_pp_rank_2_mp_rank_00_optim_states.safetensors"));
  CHECK_THAT(r.output, Catch::Contains("zero.stage3_gather_16bit_weights_on_model_save: false") &&
                           Catch::Contains("hftrain zero-to-fp32 shards/checkpoint-4 shards"));
  CHECK(train_logs(dir + "/shards/trainer_state.json") == train_logs(dir + "/out/trainer_state.json"));
  r = run_hftrain("zero-to-fp32 shards/checkpoint-4 shards", dir);
  REQUIRE(r.exit_code == 0);
  // The streamed model (gathered group by group to rank 0) holds exactly what zero-to-fp32 rebuilds.
  CHECK(same_tensors(dir + "/shards/model.safetensors", dir + "/out/model.safetensors"));

  // bf16 with precision.save_dtype bf16: the streamed masters are written rounded to bf16.
  r = run_hftrain(args + " --set training.output_dir=bf16 --set precision.bf16=true --set precision.save_dtype=bf16", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto saved = hftrain::load_safetensors(dir + "/bf16/model.safetensors").tensors;
  CHECK(saved.size() == hftrain::load_safetensors(dir + "/out/model.safetensors").tensors.size());
  for (const auto& [name, t] : saved) CHECK(t.scalar_type() == torch::kBFloat16);
  CHECK(json::parse(read_text(dir + "/bf16/config.json"))["torch_dtype"] == "bfloat16");
  fs::remove_all(dir);
}
