// Resuming on another batch layout, through the real binary: checkpoints of 2 and 1 workers resumed on 1,
// 2 and 3 workers, with the per-device batch kept and changed and with gradient accumulation, at ZeRO
// stages 0 and 2, each end at max_steps, having read the samples the checkpoint had read plus the steps
// left x the new global batch (equal to the uninterrupted run's when the global batch is kept), with the
// final trainer_state.json, logs and model of that last step. A checkpoint whose epoch this layout would
// count as finished trains its remaining steps; a resume that would put older weights over output_dir's
// model is refused without touching it; overwrite_output_dir moves the previous run aside so a bare
// --resume cannot pick its checkpoints; what changed against the checkpoint is listed.
#include <catch2/catch.hpp>

#include "checkpoint/safetensors.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// gpt on digit_reversal with `examples` training examples, logging every step, saving every `save_steps`.
std::string layout_spec(int64_t examples, int64_t batch, int64_t ga, int64_t max_steps, int64_t save_steps) {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
         "data: {type: digit_reversal, num_digits: 3, train_size: " + std::to_string(examples) +
         ", eval_size: 0, test_size: 0}\n"
         "training:\n"
         "  output_dir: out\n"
         "  per_device_train_batch_size: " + std::to_string(batch) + "\n"
         "  gradient_accumulation_steps: " + std::to_string(ga) + "\n"
         "  max_steps: " + std::to_string(max_steps) + "\n"
         "  learning_rate: 0.003\n"
         "  logging_steps: 1\n"
         "  save_strategy: steps\n"
         "  save_steps: " + std::to_string(save_steps) + "\n"
         "distributed: {intra_op_threads: 1}\n";
}

int64_t samples_seen(const std::string& checkpoint) {
  return read_json(checkpoint + "/loop_state.json").at("sampler").at("samples_seen").get<int64_t>();
}

// `out` finished at `max_steps`: trainer_state.json, its logs, the last checkpoint and the model are of
// that step (the model's weights are the last checkpoint's fp32 weights, bit for bit).
void check_ended_at(const std::string& out, int64_t max_steps) {
  const json state = read_json(out + "/trainer_state.json");
  CHECK(state.at("global_step") == max_steps);
  CHECK(state.at("max_steps") == max_steps);
  const auto logs = train_logs(out + "/trainer_state.json");
  REQUIRE(static_cast<int64_t>(logs.size()) == max_steps);  // logging_steps 1: one loss per step
  for (int64_t s = 1; s <= max_steps; ++s) CHECK(logs[static_cast<std::size_t>(s - 1)].at("step") == s);
  const std::string last = out + "/checkpoint-" + std::to_string(max_steps);
  REQUIRE(fs::exists(last + "/model.safetensors"));
  CHECK(read_json(last + "/trainer_state.json").at("global_step") == max_steps);
  const auto model = hftrain::load_safetensors(out + "/model.safetensors");
  const auto saved = hftrain::load_safetensors(last + "/model.safetensors");
  REQUIRE(model.tensors.size() == saved.tensors.size());
  for (const auto& [name, t] : saved.tensors) {
    INFO(name);
    CHECK(torch::equal(model.tensors.at(name), t));
  }
}

struct Resume {
  int world, batch, ga;
};

}  // namespace

TEST_CASE("a checkpoint resumed on 1, 2 or 3 workers ends at max_steps from its exact data position", "[integration][resume]") {
  // 240 examples; the saved runs have global batch 12 (2 x 3 x 2 or 1 x 6 x 2): 20 steps per epoch, a
  // checkpoint every 5 steps, max_steps 28 (an epoch boundary is crossed after the resume at step 5).
  const std::string dir = dist_dir("resume_layouts");
  write_text(dir + "/spec.yaml", layout_spec(240, 3, 2, 28, 5));
  for (const auto& [out, args] : std::vector<std::pair<std::string, std::string>>{
           {"w2s0", "--nproc-per-node 2 --set zero.stage=0"},
           {"w2s2", "--nproc-per-node 2 --set zero.stage=2"},
           {"w1s0", "--set training.per_device_train_batch_size=6"}}) {
    CliResult r = run_hftrain("train spec.yaml " + args + " --set training.output_dir=" + out, dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    check_ended_at(dir + "/" + out, 28);
    CHECK(samples_seen(dir + "/" + out + "/checkpoint-28") == 28 * 12);
  }
  const int64_t at_checkpoint = 5 * 12;
  CHECK(samples_seen(dir + "/w2s0/checkpoint-5") == at_checkpoint);

  struct Case {
    std::string from;
    int stage;
    Resume to;
  };
  const std::vector<Case> cases = {
      {"w2s0", 0, {1, 3, 2}},  // 2 -> 1, per-device batch kept: global batch 6
      {"w2s2", 2, {1, 6, 2}},  // 2 -> 1, per-device batch doubled: global batch kept
      {"w1s0", 0, {2, 6, 2}},  // 1 -> 2, per-device batch kept: global batch 24
      {"w1s0", 2, {2, 3, 2}},  // 1 -> 2 at stage 2, per-device batch halved: global batch kept
      {"w2s0", 0, {3, 5, 1}},  // 2 -> 3, batch and accumulation changed: global batch 15
      {"w2s2", 2, {3, 2, 2}},  // 2 -> 3 at stage 2, batch changed: global batch kept
  };
  for (const auto& c : cases) {
    const std::string out = c.from + "_to_" + std::to_string(c.to.world) + "x" + std::to_string(c.to.batch) + "x" +
                            std::to_string(c.to.ga) + "s" + std::to_string(c.stage);
    CliResult r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(c.to.world) + " --set zero.stage=" +
                                  std::to_string(c.stage) + " --set training.per_device_train_batch_size=" +
                                  std::to_string(c.to.batch) + " --set training.gradient_accumulation_steps=" +
                                  std::to_string(c.to.ga) + " --set training.output_dir=" + out + " --resume " + c.from +
                                  "/checkpoint-5",
                              dir);
    INFO(out << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("resumed at step 5 (epoch 0, after 60 of its 240 samples") &&
                             Catch::Contains("training to step 28 (23 steps)"));
    check_ended_at(dir + "/" + out, 28);
    const int64_t global = c.to.world * c.to.batch * c.to.ga;
    const int64_t seen = samples_seen(dir + "/" + out + "/checkpoint-28");
    // The checkpoint's samples plus 23 steps of the new global batch (an epoch's last batch may be short).
    CHECK(seen <= at_checkpoint + 23 * global);
    CHECK(seen >= at_checkpoint + 23 * global - global);
    if (global == 12) CHECK(std::abs(seen - 28 * 12) <= 12);  // the uninterrupted run's
    if (c.to.world != (c.from == "w1s0" ? 1 : 2)) CHECK_THAT(r.output, Catch::Contains("world size: "));
  }
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint whose epoch this layout counts as finished still trains its remaining steps", "[integration][resume]") {
  // The small-dataset case: 48 examples, 2 workers x 4 = 6 steps per epoch; checkpoint-18 ends
  // epoch 2. On 1 worker x 4 an epoch is 12 steps, so HF's arithmetic (epochs from max_steps: 2) has no
  // epoch left to run; the run must still train steps 19 and 20.
  const std::string dir = dist_dir("resume_small_data");
  write_text(dir + "/spec.yaml", layout_spec(48, 4, 1, 20, 6));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set training.max_steps=18", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_hftrain("train spec.yaml --set training.output_dir=one --resume out/checkpoint-18", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("resumed at step 18 (epoch 3;") && Catch::Contains("training to step 20 (2 steps)"));
  check_ended_at(dir + "/one", 20);
  CHECK(samples_seen(dir + "/one/checkpoint-20") == 18 * 8 + 2 * 4);
  const json metrics = read_json(dir + "/one/train_results.json");
  CHECK(metrics.at("train_samples_per_second").get<double>() > 0);
  fs::remove_all(dir);
}

TEST_CASE("a resume that would replace output_dir's newer model is refused, and overwrite moves the old run aside",
          "[integration][resume]") {
  const std::string dir = dist_dir("resume_stale");
  write_text(dir + "/spec.yaml", layout_spec(48, 4, 1, 20, 6));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string model_bytes = read_bytes(dir + "/out/model.safetensors");
  const std::string state_text = read_text(dir + "/out/trainer_state.json");

  // checkpoint-12 to max_steps 15 into out, which holds the model of step 20: refused before anything is written.
  r = run_hftrain("train spec.yaml --set training.max_steps=15 --resume out/checkpoint-12", dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("out/checkpoint-12") && Catch::Contains("model of step 20") &&
                           Catch::Contains("training.resume_over_newer_model=true"));
  CHECK(read_bytes(dir + "/out/model.safetensors") == model_bytes);
  CHECK(read_text(dir + "/out/trainer_state.json") == state_text);
  CHECK_FALSE(fs::exists(dir + "/out/checkpoint-15"));
  // Allowed explicitly; the changes against the checkpoint are listed in one block.
  r = run_hftrain("train spec.yaml --set training.max_steps=15 --set training.learning_rate=0.001 "
                  "--set training.resume_over_newer_model=true --resume out/checkpoint-12",
                  dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("changes against the checkpoint's run:") &&
                           Catch::Contains("world size: 2 -> 1") && Catch::Contains("training.learning_rate: 0.003 -> 0.001") &&
                           Catch::Contains("training.max_steps: 20 -> 15"));
  CHECK(read_json(dir + "/out/trainer_state.json").at("global_step") == 15);

  // A fresh run with overwrite_output_dir moves the old checkpoints and model aside; a bare --resume then
  // continues the new run (checkpoint-8), not the old run's checkpoint-20.
  r = run_hftrain("train spec.yaml --set training.overwrite_output_dir=true --set training.max_steps=8 "
                  "--set training.save_steps=4",
                  dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("previous_run-1"));
  CHECK(fs::exists(dir + "/out/previous_run-1/checkpoint-20/manifest.json"));
  CHECK(read_bytes(dir + "/out/previous_run-1/checkpoint-20/model.safetensors").size() > 0);
  CHECK_FALSE(fs::exists(dir + "/out/checkpoint-20"));
  CHECK(read_json(dir + "/out/trainer_state.json").at("global_step") == 8);
  r = run_hftrain("train spec.yaml --set training.max_steps=12 --set training.save_steps=4 --resume", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("resuming from out/checkpoint-8"));
  check_ended_at(dir + "/out", 12);
  fs::remove_all(dir);
}
