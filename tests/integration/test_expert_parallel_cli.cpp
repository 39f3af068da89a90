// Expert parallelism through the binary (distributed.expert_parallel_size): a tiny mixtral with the load-balancing
// loss whose 4 experts run 2 per rank on a group of 2 workers follows 1 worker over the same global batch, step by
// step (loss, grad_norm, aux_loss), at ZeRO stages 1 and 3 (with gradient checkpointing), and two groups on 4
// workers likewise, and LoRA adapters on the expert projections at stage 2; a checkpoint of the group resumes with expert_parallel_size 1 on 2 workers and on 1 worker,
// continuing as the uninterrupted runs there do; layouts the world or the model cannot hold are refused by name.
#include <catch2/catch.hpp>

#include "test_dist_helpers.h"
#include "test_tensor_files.h"

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

namespace {

// log_history entries of an evaluation, in order.
std::vector<json> ep_eval_logs(const std::string& trainer_state_path) {
  std::vector<json> out;
  const json state = read_json(trainer_state_path);
  for (const auto& e : state.at("log_history"))
    if (e.contains("eval_loss")) out.push_back(e);
  return out;
}

// The largest difference between same-named tensors of two safetensors files (which must hold the same names).
double ep_max_difference(const std::string& a, const std::string& b) {
  const auto x = hftrain::load_safetensors(a).tensors, y = hftrain::load_safetensors(b).tensors;
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (const auto& [name, t] : x) {
    INFO(name);
    REQUIRE(y.count(name) == 1);
    worst = std::max(worst, (t.to(torch::kDouble) - y.at(name).to(torch::kDouble)).abs().max().item<double>());
  }
  return worst;
}

}  // namespace

// At stages 1-2 the experts live only on their members' expert-data-parallel ranks (DeepSpeed-MoE's layout): the
// engine's flat groups of a member's experts are held by those ranks alone, so a rank of a group of 2 holds half the
// 6144 expert elements (2 layers x 4 experts x 3 projections of 16 x 16).
TEST_CASE("at ZeRO stages 1 and 2 each rank holds only its member's experts: training, evaluation and generation "
          "follow 1 worker, the saved model equals 1 worker's, and checkpoints cut into and out of that layout",
          "[integration][moe][expert_parallel]") {
  const std::string dir = dist_dir("expert_data_parallel");
  write_text(dir + "/spec.yaml", kExpertSpec);
  const std::string with_eval = "--set training.do_eval=true --set training.eval_strategy=steps --set training.eval_steps=2 "
                                "--set training.predict_with_generate=true --set training.save_strategy=steps "
                                "--set training.save_steps=2 ";
  train_ep(dir, with_eval + "--set training.output_dir=one");
  const std::string ep = train_ep(dir, kGroupOfTwo + with_eval + "--set zero.stage=2 --set training.output_dir=ep");
  INFO(ep);
  CHECK_THAT(ep, Catch::Contains("routed experts held by their members' 1 expert-data-parallel rank(s): 3072 of 6144 "
                                 "expert elements here"));
  const json memory = engine_memory_report(ep);
  REQUIRE(memory.contains("ranks"));
  for (const auto& rank : memory.at("ranks"))  // fp32: every dense element and half the experts' (the other half: none)
    CHECK(rank.at("param_bytes").get<int64_t>() == 4 * (memory.at("numel").get<int64_t>() - 3072));
  // hftrain estimate sizes the same layout as the engine holds it.
  const json estimate = json::parse(run_ok("estimate spec.yaml --nproc-per-node 2 --set distributed.expert_parallel_size=2 --json", dir));
  bool estimated = false;
  for (const auto& row : estimate.at("rows"))
    if (row.at("stage") == 2 && row.at("precision") == "fp32" && row.at("offload") == "none") {
      estimated = true;
      CHECK(row.at("params") == memory.at("ranks")[0].at("param_bytes"));
      CHECK(row.at("grads") == memory.at("ranks")[0].at("grad_bytes"));
    }
  CHECK(estimated);
  check_follows(dir + "/ep/trainer_state.json", dir + "/one/trainer_state.json", 0, 1e-5);
  const std::vector<json> evals = ep_eval_logs(dir + "/ep/trainer_state.json"),
                          evals_one = ep_eval_logs(dir + "/one/trainer_state.json");
  REQUIRE(evals.size() == 2);
  REQUIRE(evals_one.size() == evals.size());
  for (std::size_t i = 0; i < evals.size(); ++i) {
    CHECK(evals[i]["eval_loss"].get<double>() == Approx(evals_one[i]["eval_loss"].get<double>()).epsilon(1e-5));
    CHECK(evals[i]["eval_gen_len"] == evals_one[i]["eval_gen_len"]);  // generation ran over the group, in lockstep
  }
  CHECK(ep_max_difference(dir + "/ep/model.safetensors", dir + "/one/model.safetensors") < 1e-5);
  // zero-to-fp32 assembles each expert from the ranks that held it: the checkpoint's own fp32 weights, bit for bit.
  run_ok("zero-to-fp32 ep/checkpoint-2 ep_fp32", dir);
  CHECK(same_tensors(dir + "/ep_fp32/model.safetensors", dir + "/ep/checkpoint-2/model.safetensors"));
  // The checkpoint resumes in its own layout, and 1 worker's is cut into it (stage 1 this time).
  train_ep(dir, kGroupOfTwo + "--set zero.stage=2 --set training.output_dir=ep_resumed --resume ep/checkpoint-2");
  check_follows(dir + "/ep_resumed/trainer_state.json", dir + "/ep/trainer_state.json", 2, 1e-6);
  train_ep(dir, kGroupOfTwo + "--set zero.stage=1 --set training.output_dir=ep_from_one --resume one/checkpoint-2");
  check_follows(dir + "/ep_from_one/trainer_state.json", dir + "/one/trainer_state.json", 2, 1e-6);
  // bf16 masters in the swap file: a rank swaps only the expert groups it holds, and trains as with them in memory.
  fs::create_directories(dir + "/swap");
  const std::string bf16 = kGroupOfTwo + "--set zero.stage=2 --set precision.bf16=true ";
  train_ep(dir, bf16 + "--set training.output_dir=ep_bf16");
  train_ep(dir, bf16 + "--set zero.offload_optimizer.device=nvme --set zero.offload_optimizer.nvme_path=swap "
                       "--set training.output_dir=ep_nvme");
  check_follows(dir + "/ep_nvme/trainer_state.json", dir + "/ep_bf16/trainer_state.json", 0, 1e-7);
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
