// Expert parallelism through the binary (distributed.expert_parallel_size): a tiny mixtral with the load-balancing
// loss whose 4 experts run 2 per rank on a group of 2 workers follows 1 worker over the same global batch, step by
// step (loss, grad_norm, aux_loss), at ZeRO stages 1 and 3 (with gradient checkpointing), and two groups on 4
// workers likewise, and LoRA adapters on the expert projections at stage 2; a checkpoint of the group resumes with expert_parallel_size 1 on 2 workers and on 1 worker,
// continuing as the uninterrupted runs there do; layouts the world or the model cannot hold are refused by name.
#include <catch2/catch.hpp>

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kExpertSpec =
    "model: {type: mixtral, hidden_size: 16, intermediate_size: 16, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, num_local_experts: 4, num_experts_per_tok: 2, output_router_logits: true, "
    "router_aux_loss_coef: 0.1}\n"
    "data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 8, test_size: 0}\n"
    "training: {output_dir: out, per_device_train_batch_size: 1, gradient_accumulation_steps: 8, max_steps: 4, "
    "learning_rate: 0.003, max_grad_norm: 1.0, logging_steps: 1, save_strategy: \"no\", do_eval: false}\n"
    "distributed: {ddp_timeout: 60, intra_op_threads: 1}\n"
    "zero: {stage3_param_persistence_threshold: 20}\n";

// 2 workers, one row per micro-batch each: the micro-batches of 1 worker at accumulation 8, so the load-balancing
// loss (not additive over rows) is the same too.
const std::string kGroupOfTwo = "--nproc-per-node 2 --set distributed.expert_parallel_size=2 "
                                "--set training.gradient_accumulation_steps=4 ";

std::string train_ep(const std::string& dir, const std::string& args) { return run_ok("train spec.yaml " + args, dir); }

// Logged steps `from`.. of `got` follow `expected`'s (a resumed run's log starts with its checkpoint's): the loss within the logged rounding (4 decimals), grad_norm to `rel`,
// the load-balancing loss to 1e-3 (the mean over the ranks' micro-batches).
void check_follows(const std::string& got_state, const std::string& expected_state, std::size_t from, double rel) {
  const std::vector<json> got = train_logs(got_state), expected = train_logs(expected_state);
  REQUIRE(expected.size() == 4);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = from; i < got.size(); ++i) {
    const json& e = expected[i];
    INFO("step " << e["step"]);
    CHECK(got[i]["step"] == e["step"]);
    CHECK(std::abs(got[i]["loss"].get<double>() - e["loss"].get<double>()) <= 1.0001e-4);
    CHECK(std::abs(got[i]["grad_norm"].get<double>() - e["grad_norm"].get<double>()) <= rel * e["grad_norm"].get<double>());
    REQUIRE(got[i].contains("aux_loss"));
    CHECK(got[i]["aux_loss"].get<double>() == Approx(e["aux_loss"].get<double>()).epsilon(1e-3));
  }
}

}  // namespace

TEST_CASE("a mixtral whose experts run over a group of 2 workers follows 1 worker at ZeRO stages 1 and 3, two groups "
          "on 4 workers and LoRA on the experts likewise, and the group's checkpoint resumes without expert parallelism",
          "[integration][moe][expert_parallel]") {
  const std::string dir = dist_dir("expert_parallel");
  write_text(dir + "/spec.yaml", kExpertSpec);
  train_ep(dir, "--set training.output_dir=one");
  const std::string group = train_ep(dir, kGroupOfTwo + "--set zero.stage=1 --set training.output_dir=ep_z1 "
                                                        "--set training.save_strategy=steps --set training.save_steps=2");
  INFO(group);
  CHECK_THAT(group, Catch::Contains("expert parallel: groups of 2 consecutive ranks"));
  train_ep(dir, kGroupOfTwo + "--set zero.stage=3 --set training.gradient_checkpointing=true --set training.output_dir=ep_z3");
  train_ep(dir, "--nproc-per-node 4 --set distributed.expert_parallel_size=2 --set training.gradient_accumulation_steps=2 "
                "--set zero.stage=2 --set training.output_dir=ep_four");
  {
    INFO("a group of 2, stage 1");
    check_follows(dir + "/ep_z1/trainer_state.json", dir + "/one/trainer_state.json", 0, 1e-5);
  }
  {
    INFO("a group of 2, stage 3, checkpointed");
    check_follows(dir + "/ep_z3/trainer_state.json", dir + "/one/trainer_state.json", 0, 1e-5);
  }
  {
    INFO("two groups of 2 on 4 workers, stage 2");
    check_follows(dir + "/ep_four/trainer_state.json", dir + "/one/trainer_state.json", 0, 1e-5);
  }
  // LoRA on the expert projections (and q_proj): a member's adapters of the experts it runs take the group's rows.
  write_text(dir + "/lora.yaml", std::string(kExpertSpec) +
                                     "peft: {r: 4, lora_alpha: 8, init_lora_weights: gaussian, "
                                     "target_modules: [q_proj, w1, w2, w3]}\n");
  run_ok("train lora.yaml --set training.output_dir=lora_one", dir);
  run_ok("train lora.yaml " + kGroupOfTwo + "--set zero.stage=2 --set training.output_dir=lora_ep", dir);
  {
    INFO("LoRA on the experts, a group of 2, stage 2");
    check_follows(dir + "/lora_ep/trainer_state.json", dir + "/lora_one/trainer_state.json", 0, 1e-5);
  }
  // The group's checkpoint names every expert under its HF name whoever ran it: it resumes with expert parallelism
  // off on the same 2 workers and on 1, each continuing as the uninterrupted run there does.
  train_ep(dir, "--nproc-per-node 2 --set training.gradient_accumulation_steps=4 --set zero.stage=1 "
                "--set training.output_dir=two");
  const std::string resumed_two = train_ep(dir, "--nproc-per-node 2 --set training.gradient_accumulation_steps=4 "
                                                "--set zero.stage=1 --set training.output_dir=two_resumed --resume ep_z1/checkpoint-2");
  CHECK_THAT(resumed_two, Catch::Contains("resumed at step 2"));
  check_follows(dir + "/two_resumed/trainer_state.json", dir + "/two/trainer_state.json", 2, 1e-6);
  train_ep(dir, "--set training.output_dir=one_resumed --resume ep_z1/checkpoint-2");
  check_follows(dir + "/one_resumed/trainer_state.json", dir + "/one/trainer_state.json", 2, 1e-6);
  fs::remove_all(dir);
}

TEST_CASE("expert_parallel_size that the world or the experts cannot hold, or on a model without experts, is refused "
          "by name", "[integration][moe][expert_parallel]") {
  const std::string dir = dist_dir("expert_parallel_refused");
  write_text(dir + "/spec.yaml", kExpertSpec);
  CliResult alone = run_hftrain("train spec.yaml --set distributed.expert_parallel_size=2", dir);
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.output, Catch::Contains("distributed.expert_parallel_size: 2 must divide the world size 1"));
  CliResult odd = run_hftrain("train spec.yaml " + kGroupOfTwo + "--set model.num_local_experts=3", dir);
  CHECK(odd.exit_code == 2);
  CHECK_THAT(odd.output, Catch::Contains("distributed.expert_parallel_size: 2 does not divide the 3 experts"));
  write_text(dir + "/dense.yaml",
             "model: {type: llama, hidden_size: 16, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 4}\n"
             "data: {type: digit_reversal, num_digits: 3, train_size: 16, eval_size: 8, test_size: 0}\n"
             "training: {output_dir: out, max_steps: 1, do_eval: false}\n");
  CliResult dense = run_hftrain("train dense.yaml --nproc-per-node 2 --set distributed.expert_parallel_size=2", dir);
  CHECK(dense.exit_code == 2);
  CHECK_THAT(dense.output, Catch::Contains("model type 'llama' has no routed experts"));
  CHECK_FALSE(fs::exists(dir + "/out/trainer_state.json"));
  fs::remove_all(dir);
}
