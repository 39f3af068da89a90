// Universal checkpoints through the real binary: `hftrain checkpoint convert` re-partitions a 2-worker
// stage-2 checkpoint for other layouts exactly (the consolidated state equals the one this test slices out
// of the saved shards by their partition maps; a round trip gives the saved shards back bit for bit), a
// converted checkpoint resumes as if it had been saved in that layout, a stage-0 checkpoint resumes at
// stages 2 and 3, and converting streams (peak memory well under the state it converts).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "peak_rss.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string shard_path(const std::string& ckpt, int step, int rank) {
  return ckpt + "/global_step" + std::to_string(step) + "/zero_pp_rank_" + std::to_string(rank) +
         "_mp_rank_00_optim_states.safetensors";
}

// Per parameter and slot ("<name>.<slot>", "<name>" for the fp32 master), the values of a ZeRO checkpoint
// concatenated from its shards by their partition map (the rule of engine/partition.h, applied here).
std::map<std::string, torch::Tensor> consolidate_shards(const std::string& ckpt, int step) {
  const auto first = hftrain::load_safetensors(shard_path(ckpt, step, 0));
  const auto map = hftrain::PartitionMap::from_json(json::parse(first.metadata.at("partition")), "test");
  std::vector<hftrain::SafetensorsFile> shards;
  for (int r = 0; r < map.world_size; ++r) shards.push_back(hftrain::load_safetensors(shard_path(ckpt, step, r)));
  std::map<std::string, torch::Tensor> out;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    const auto& info = map.groups[g];
    std::map<std::string, std::vector<torch::Tensor>> pieces;
    for (int r = 0; r < map.world_size; ++r)
      for (const auto& [key, t] : shards[r].tensors) {
        const std::string master = "fp32_flat_group_" + std::to_string(g);
        const std::string prefix = "optimizer_state.flat_group_" + std::to_string(g) + ".";
        if (key == master) pieces[""].push_back(t);
        else if (key.rfind(prefix, 0) == 0 && t.dim() == 1) pieces[key.substr(prefix.size())].push_back(t);
      }
    for (auto& [slot, parts] : pieces) {
      auto whole = torch::cat(parts);
      for (const auto& p : info.params)
        out[slot.empty() ? p.name : p.name + "." + slot] = whole.narrow(0, p.offset, p.numel).view(p.shape);
    }
  }
  return out;
}

void check_same_tensors(const std::map<std::string, torch::Tensor>& got, const std::map<std::string, torch::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [k, v] : want) {
    INFO(k);
    REQUIRE(got.count(k) == 1);
    CHECK(torch::equal(got.at(k), v));
  }
}

std::map<std::string, torch::Tensor> without_step_counters(std::map<std::string, torch::Tensor> m) {
  for (auto it = m.begin(); it != m.end();) it = it->second.dim() == 0 ? m.erase(it) : std::next(it);
  return m;
}

}  // namespace

TEST_CASE("checkpoint convert re-partitions exactly and the result resumes as saved", "[integration][universal]") {
  const std::string dir =
      trained_dist_dir("universal_convert", 12, 6, "--nproc-per-node 2 --set zero.stage=2 --set training.per_device_train_batch_size=3");
  const auto saved = consolidate_shards(dir + "/out/checkpoint-6", 6);

  // To 3 workers at stage 1: every parameter's master and moments, consolidated again, are the saved ones.
  CliResult r = run_hftrain("checkpoint convert out/checkpoint-6 --nproc-per-node 3 --stage 1 w3", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("converting out/checkpoint-6 (step 6, 2 workers at ZeRO stage 2 (fp32)) to 3 workers"));
  check_same_tensors(consolidate_shards(dir + "/w3/checkpoint-6", 6), saved);
  CHECK(run_hftrain("checkpoint inspect w3/checkpoint-6", dir).exit_code == 0);  // complete, manifest verified
  // Each manifest records its layout; the partition map is the one in the shards.
  for (const auto& [ckpt, world, stage] : std::vector<std::tuple<std::string, int, int>>{{"out", 2, 2}, {"w3", 3, 1}}) {
    INFO(ckpt);
    const json layout = json::parse(read_text(dir + "/" + ckpt + "/checkpoint-6/manifest.json")).at("layout");
    CHECK(layout.at("world_size") == world);
    CHECK(layout.at("zero_stage") == stage);
    CHECK(layout.at("dtypes").at("master_weights") == "fp32");
    const auto shard = hftrain::load_safetensors(shard_path(dir + "/" + ckpt + "/checkpoint-6", 6, world - 1));
    CHECK(layout.at("partition") == json::parse(shard.metadata.at("partition")));
  }

  // To 1 worker at stage 0: optimizer.safetensors holds exactly the saved moments, model.safetensors the masters.
  r = run_hftrain("checkpoint convert w3/checkpoint-6 --nproc-per-node 1 --stage 0 w1", dir);
  REQUIRE(r.exit_code == 0);
  auto optim = hftrain::load_safetensors(dir + "/w1/checkpoint-6/optimizer.safetensors").tensors;
  CHECK(optim.at("transformer.h.0.attn.c_attn.weight.step").item<int64_t>() == 6);
  auto model = hftrain::load_safetensors(dir + "/w1/checkpoint-6/model.safetensors").tensors;
  std::map<std::string, torch::Tensor> stage0 = without_step_counters(optim);
  for (const auto& [k, v] : saved)
    if (k.find(".exp_avg") == std::string::npos) stage0[k] = model.at(k);
  check_same_tensors(stage0, saved);

  // And back to 2 workers at stage 2: the saved shards' tensors, bit for bit.
  r = run_hftrain("checkpoint convert w1/checkpoint-6 --nproc-per-node 2 --stage 2 w2", dir);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto a = hftrain::load_safetensors(shard_path(dir + "/out/checkpoint-6", 6, rank));
    auto b = hftrain::load_safetensors(shard_path(dir + "/w2/checkpoint-6", 6, rank));
    check_same_tensors(b.tensors, a.tensors);
    CHECK(b.metadata.at("partition") == a.metadata.at("partition"));
  }

  // The converted 3-worker checkpoint is already in the resuming layout: no re-partitioning at load, and
  // steps 7-12 follow the uninterrupted run (same global batch; reductions add in another order).
  r = run_hftrain("train spec.yaml --nproc-per-node 3 --set zero.stage=1 --set training.per_device_train_batch_size=2 "
                  "--set training.output_dir=w3 --resume w3/checkpoint-6",
                  dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("re-partitioning") == std::string::npos);
  const auto full = train_logs(dir + "/out/trainer_state.json");
  const auto got = train_logs(dir + "/w3/trainer_state.json");
  REQUIRE(got.size() == 12);
  for (std::size_t i = 6; i < 12; ++i) {
    const double want = full[i]["loss"], loss = got[i]["loss"];
    CHECK(std::abs(loss - want) <= 5e-5 + 1e-5 * std::abs(want));
  }

  // Bad requests: stage 3 is laid out at load time; an incomplete checkpoint is named.
  r = run_hftrain("checkpoint convert out/checkpoint-6 --nproc-per-node 2 --stage 3 s3", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--stage 3 is not written offline"));
  fs::remove(shard_path(dir + "/out/checkpoint-6", 6, 1));
  r = run_hftrain("checkpoint convert out/checkpoint-6 --nproc-per-node 2 --stage 1 broken", dir);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("zero_pp_rank_1_mp_rank_00_optim_states.safetensors"));
  CHECK_FALSE(fs::exists(dir + "/broken/checkpoint-6"));
  fs::remove_all(dir);
}

TEST_CASE("a stage-0 checkpoint resumes at stages 2 and 3", "[integration][universal]") {
  const std::string dir =
      trained_dist_dir("universal_stage0", 12, 6, "--nproc-per-node 2 --set zero.stage=0 --set training.per_device_train_batch_size=3");
  const auto full = train_logs(dir + "/out/trainer_state.json");
  for (const auto& [world, stage] : std::vector<std::pair<int, int>>{{2, 2}, {3, 3}}) {
    const std::string out = "s" + std::to_string(stage);
    CliResult r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(world) + " --set zero.stage=" + std::to_string(stage) +
                        " --set training.per_device_train_batch_size=" + std::to_string(6 / world) +
                        " --set zero.stage3_param_persistence_threshold=20 --set training.output_dir=" + out +
                        " --resume out/checkpoint-6",
                    dir);
    INFO(out << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("re-partitioning the training state of 2 workers at ZeRO stage 0 for " +
                                         std::to_string(world) + " workers"));
    const auto got = train_logs(dir + "/" + out + "/trainer_state.json");
    REQUIRE(got.size() == 12);
    for (std::size_t i = 6; i < 12; ++i) {
      INFO("step " << i + 1);
      const double want = full[i]["loss"], loss = got[i]["loss"];
      CHECK(std::abs(loss - want) <= 5e-5 + 1e-5 * std::abs(want));
      const double want_norm = full[i]["grad_norm"], norm = got[i]["grad_norm"];
      CHECK(std::abs(norm - want_norm) <= 1e-5 * std::abs(want_norm));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("checkpoint convert streams: its peak memory stays well under the state it converts", "[integration][universal][slow]") {
  // A 2-worker stage-2 checkpoint of a model whose fp32 masters + Adam moments are 225 MiB, converted to 4
  // workers; the conversion's peak RSS (the kernel's, via wait4) is compared with the same binary's
  // `checkpoint inspect` of the same checkpoint, which reads headers only (the process's own baseline).
  const std::string dir = dist_dir("universal_convert_rss");
  write_text(dir + "/spec.yaml",
             "model: {type: gpt, n_layer: 4, n_head: 8, n_embd: 640}\n"
             "data: {type: digit_reversal, num_digits: 3, train_size: 16, eval_size: 0, test_size: 0}\n"
             "training: {output_dir: out, per_device_train_batch_size: 2, max_steps: 1, save_strategy: steps, "
             "save_steps: 1, logging_steps: 1}\n");
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  uint64_t state_bytes = 0;
  for (int rank = 0; rank < 2; ++rank) state_bytes += fs::file_size(shard_path(dir + "/out/checkpoint-1", 1, rank));

  const PeakRssEnvironment environment;
  auto peak_rss = [&](const std::vector<std::string>& args) {
    std::vector<char*> argv = {const_cast<char*>(HFTRAIN_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {  // no allocation from here on
      if (::chdir(dir.c_str()) != 0) ::_exit(125);
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execve(HFTRAIN_BINARY, argv.data(), environment.envp());
      ::_exit(127);
    }
    int status = 0;
    struct rusage ru {};
    REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return static_cast<double>(ru.ru_maxrss) * 1024.0;
  };
  const double baseline = peak_rss({"checkpoint", "inspect", "out/checkpoint-1"});
  const double convert = peak_rss({"checkpoint", "convert", "out/checkpoint-1", "--nproc-per-node", "4", "--stage", "2", "w4"});
  INFO("state " << state_bytes / (1 << 20) << " MiB; peak RSS: inspect " << baseline / (1 << 20) << " MiB, convert "
                << convert / (1 << 20) << " MiB");
  // One new shard (a quarter of the state) and its serialised bytes at a time.
  CHECK(convert - baseline <= 0.5 * static_cast<double>(state_bytes));
  CHECK(fs::exists(shard_path(dir + "/w4/checkpoint-1", 1, 3)));
  fs::remove_all(dir);
}
