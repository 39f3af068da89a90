// Data parallelism through the real binary: `hftrain train --nproc-per-node W` with zero.stage 0 to 3
// follows the loss trajectory of one process with the same global batch (the single-process
// loop is itself checked against plain PyTorch by the reference test); per-rank memory of stages 1-2
// is the 1/N share the ZeRO paper gives; and a worker that is killed or fails ends the whole job
// within 10 s with a message naming the rank.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

TEST_CASE("stages 0-3 on 1, 2 and 3 workers follow the single-process trajectory", "[integration][dist]") {
  const std::string dir = dist_dir("dist_equivalence");
  write_text(dir + "/spec.yaml", dist_spec(30));
  // Reference: one process, per-device batch 6 = the global batch (x2 accumulation).
  CliResult ref = run_hftrain("train spec.yaml --set training.output_dir=ref", dir);
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  const auto expected = train_logs(dir + "/ref/trainer_state.json");
  REQUIRE(expected.size() == 30);

  for (int stage : {0, 1, 2, 3})
    for (int world : {1, 2, 3}) {
      if (stage == 0 && world == 1) continue;  // the reference itself
      const std::string out = "s" + std::to_string(stage) + "_w" + std::to_string(world);
      CliResult r = run_hftrain("train spec.yaml --nproc-per-node " + std::to_string(world) + " --set zero.stage=" +
                                    std::to_string(stage) + " --set training.per_device_train_batch_size=" +
                                    std::to_string(6 / world) + " --set training.output_dir=" + out +
                                    // stage 3: partition the matrices, keep the 16-element vectors whole
                                    (stage == 3 ? " --set zero.stage3_param_persistence_threshold=20" : ""),
                                dir);
      INFO("zero stage " << stage << ", " << world << " worker(s)\n" << r.output);
      REQUIRE(r.exit_code == 0);
      const auto got = train_logs(dir + "/" + out + "/trainer_state.json");
      REQUIRE(got.size() == expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("step " << got[i]["step"]);
        const double want_loss = expected[i]["loss"], loss = got[i]["loss"];
        // The logged loss is rounded to 4 decimals (as HF does): half a unit of the last place.
        CHECK(std::abs(loss - want_loss) <= 5e-5 + 1e-5 * std::abs(want_loss));
        const double want_norm = expected[i]["grad_norm"], norm = got[i]["grad_norm"];
        CHECK(std::abs(norm - want_norm) <= 1e-5 * std::abs(want_norm));
        CHECK(got[i]["learning_rate"] == expected[i]["learning_rate"]);
        CHECK(got[i]["epoch"] == expected[i]["epoch"]);
      }
      // Only rank 0 writes the run's files.
      CHECK(fs::exists(dir + "/" + out + "/train_results.json"));
      // total_flos counts every worker's tokens (HF sums current_flos over the ranks): the same global batch,
      // the same FLOPs, in the run's metrics and in trainer_state.json.
      const double want_flos = nlohmann::json::parse(read_text(dir + "/ref/train_results.json")).at("total_flos");
      CHECK(nlohmann::json::parse(read_text(dir + "/" + out + "/train_results.json")).at("total_flos").get<double>() ==
            Approx(want_flos).epsilon(1e-12));
      CHECK(nlohmann::json::parse(read_text(dir + "/" + out + "/trainer_state.json")).at("total_flos").get<double>() ==
            Approx(want_flos).epsilon(1e-12));
    }
  fs::remove_all(dir);
}

TEST_CASE("ZeRO stages 1-2 keep 1/N of the optimizer state (and stage 2 of the gradients) per rank",
          "[integration][dist]") {
  const std::string dir = dist_dir("dist_memory");
  write_text(dir + "/spec.yaml", dist_spec(2));
  for (int stage : {1, 2}) {
    const int world = 3;
    CliResult r = run_hftrain("train spec.yaml --nproc-per-node 3 --set zero.stage=" + std::to_string(stage) +
                                  " --set training.per_device_train_batch_size=2 --set training.output_dir=m" +
                                  std::to_string(stage),
                              dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const json report = engine_memory_report(r.output);
    REQUIRE(report.is_object());
    const int64_t numel = report["numel"], padded = report["padded_numel"];
    CHECK(padded >= numel);
    CHECK(padded - numel < 2 * 2 * world);  // alignment 2 * world size, per group (decay / no-decay)
    REQUIRE(report["ranks"].size() == 3u);
    // AdamW keeps exp_avg and exp_avg_sq (8 bytes per element): the whole model would need 8 * numel.
    const double full_optimizer = 8.0 * static_cast<double>(numel);
    int64_t optimizer_total = 0;
    for (const auto& rank : report["ranks"]) {
      INFO(rank.dump());
      const int64_t opt = rank["optimizer_state_bytes"];
      optimizer_total += opt;
      // Within padding (plus two step counters) of 1/N of the total.
      CHECK(std::abs(static_cast<double>(opt) - full_optimizer / world) <= 8.0 * 2 * 2 + 16);
      const int64_t grads = rank["grad_bytes"];
      if (stage == 2) CHECK(std::abs(static_cast<double>(grads) - 4.0 * numel / world) <= 4.0 * 2 * 2);
      else CHECK(grads == 4 * padded);  // stage 1 keeps full gradients
      CHECK(rank["param_bytes"] == 4 * padded);  // parameters are replicated in stages 1-2
      // Traffic of the first step: reduce-scatter sends (N-1)/N of the padded gradients per pass,
      // all-gather (N-1)/N of the parameters.
      const int64_t passes = stage == 2 ? 2 : 1;  // stage 2 reduces on both micro-steps of the window
      CHECK(rank["sent_bytes_first_step"]["reduce_scatter"] == passes * 4 * padded * (world - 1) / world);
      CHECK(rank["sent_bytes_first_step"]["all_gather"] == 4 * padded * (world - 1) / world);
    }
    CHECK(std::abs(static_cast<double>(optimizer_total) - full_optimizer) <= 8.0 * 2 * 2 * world + 16 * world);
  }
  fs::remove_all(dir);
}

TEST_CASE("a worker killed by SIGKILL mid-run ends the job, naming its rank and the signal",
          "[integration][dist]") {
  const std::string dir = dist_dir("dist_sigkill");
  write_text(dir + "/spec.yaml", dist_spec(400));
  Child c = spawn_hftrain({"train", "spec.yaml", "--nproc-per-node", "2", "--set", "zero.stage=1", "--set",
                           "training.per_device_train_batch_size=3"},
                          dir, {"HFTRAIN_FAULT_INJECT=step_delay_ms:50"});
  REQUIRE(c.read_until("step 3/", 60));
  pid_t victim = -1;
  for (pid_t p : children_of(c.pid))
    if (rank_of(p) == 1) victim = p;
  REQUIRE(victim > 0);
  ::kill(victim, SIGKILL);
  const int code = c.wait(60);  // -1 if the job still runs (the survivors would wait out ddp_timeout, 1800 s)
  INFO(c.output);
  CHECK(code == 1);
  CHECK(c.output.find("worker rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9 (SIGKILL)") !=
        std::string::npos);
  CHECK(children_of(c.pid).empty());
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM to a 2-worker job saves one checkpoint and rank 0 alone prints the stop and the resume command",
          "[integration][dist]") {
  const std::string dir = dist_dir("dist_sigterm");
  write_text(dir + "/spec.yaml", dist_spec(400));
  Child c = spawn_hftrain({"train", "spec.yaml", "--nproc-per-node", "2"}, dir, {"HFTRAIN_FAULT_INJECT=step_delay_ms:50"});
  REQUIRE(c.read_until("step 3/", 60));
  ::kill(c.pid, SIGTERM);  // the launcher forwards it to both workers, as torchrun does
  const int code = c.wait(60);
  INFO(c.output);
  CHECK(code == 143);
  auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (auto at = c.output.find(text); at != std::string::npos; at = c.output.find(text, at + 1)) ++n;
    return n;
  };
  CHECK(count("received SIGTERM: finishing the current optimizer step") == 1);
  CHECK(count("resume with:") == 1);
  CHECK(count("checkpoint saved to out/checkpoint-") == 1);
  CHECK(c.output.find("[rank 1] \n") == std::string::npos);  // no empty prefixed line
  CHECK(c.output.find("[rank 1] stopped by") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a worker that throws ends the job, naming its rank, exit code and last output", "[integration][dist]") {
  const std::string dir = dist_dir("dist_throw");
  // Rank 0 fails at its first checkpoint write (a full disk); rank 1 is left waiting for it.
  write_text(dir + "/spec.yaml", dist_spec(20, "  save_strategy: steps\n  save_steps: 3\n"));
  Child c = spawn_hftrain({"train", "spec.yaml", "--nproc-per-node", "2", "--set", "training.per_device_train_batch_size=3"},
                          dir, {"HFTRAIN_FAULT_INJECT=enospc:1"});
  const int code = c.wait(60);  // -1 if the job still runs (rank 1 would wait out ddp_timeout, 1800 s)
  INFO(c.output);
  CHECK(code == 1);
  CHECK(c.output.find("error: worker rank 0 (pid ") != std::string::npos);
  CHECK(c.output.find("exited with code 1") != std::string::npos);
  CHECK(c.output.find("No space left on device") != std::string::npos);  // its last output, quoted
  fs::remove_all(dir);
}
