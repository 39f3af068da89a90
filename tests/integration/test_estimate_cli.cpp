// `hftrain estimate` through the real binary: its per-rank figures agree with what the engine reports it
// holds after the first step (a small gpt at stages 0-3, the quickstart and the nanoGPT configs; bf16 and
// fp32; two workers; a LoRA run at stages 2 and 3), and a Llama-2-7B config.json
// (no weights) is sized and compared with DeepSpeed's formulas recomputed here, without building it.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_dist_helpers.h"

using namespace hftrain_test;
using json = nlohmann::json;

namespace {

json estimate_row(const json& estimate, int stage, const std::string& precision, const std::string& offload) {
  for (const auto& r : estimate.at("rows"))
    if (r["stage"] == stage && r["precision"] == precision && r["offload"] == offload) return r;
  FAIL("no row for stage " << stage << " " << precision << " " << offload);
  return json();
}

// Within the engine's padding of each flat group to a multiple of the world size and its step counters.
void check_close(int64_t estimated, int64_t measured) {
  CHECK(std::abs(static_cast<double>(estimated - measured)) <= 0.02 * static_cast<double>(measured) + 256);
}

}  // namespace

TEST_CASE("the estimate agrees with the engine's own memory report at every stage", "[integration][estimate]") {
  const std::string dir = dist_dir("estimate_engine");
  write_text(dir + "/spec.yaml", dist_spec(1));
  std::string text;
  for (int i = 0; i < 40; ++i) text += "To be, or not to be, that is the question: whether 'tis nobler in the mind.\n";
  write_text(dir + "/input.txt", text);
  const std::string quickstart = std::string(HFTRAIN_SOURCE_DIR) + "/configs/quickstart.yaml";
  const std::string nanogpt = std::string(HFTRAIN_SOURCE_DIR) + "/configs/shakespeare_char.yaml";
  const std::string short_run = " --set training.max_steps=1 --set training.eval_strategy=no --set training.save_strategy=no "
                                "--set training.do_eval=false";
  struct Case {
    std::string spec, extra;
    int stage;
    std::string precision;
  };
  const std::vector<Case> cases = {{"spec.yaml", "", 0, "bf16"},
                                   {"spec.yaml", "", 1, "bf16"},
                                   {"spec.yaml", "", 2, "bf16"},
                                   {"spec.yaml", "", 3, "bf16"},
                                   {"spec.yaml", "", 2, "fp32"},
                                   {quickstart, short_run, 2, "bf16"},
                                   {quickstart, short_run, 3, "fp32"},
                                   {nanogpt, short_run + " --set data.path=input.txt", 1, "fp32"},
                                   {nanogpt, short_run + " --set data.path=input.txt", 2, "bf16"}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(c.spec << " stage " << c.stage << " " << c.precision);
    const std::string sets = c.extra + " --set zero.stage=" + std::to_string(c.stage) + " --set precision.bf16=" +
                             (c.precision == "bf16" ? "true" : "false") + " --set zero.stage3_param_persistence_threshold=20";
    CliResult train = run_hftrain("train '" + c.spec + "' --nproc-per-node 2 --set training.output_dir=run" +
                                      std::to_string(i) + sets,
                                  dir);
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    const json report = engine_memory_report(train.output);
    REQUIRE(report.is_object());
    const json& rank0 = report["ranks"][0];
    CliResult est = run_hftrain("estimate '" + c.spec + "' --nproc-per-node 2 --json" + sets, dir);
    INFO(est.output);
    REQUIRE(est.exit_code == 0);
    const json estimate = json::parse(est.output);
    CHECK(estimate["parameters"] == report["numel"]);
    const json row = estimate_row(estimate, c.stage, c.precision, "none");
    CHECK(row["spec_choice"] == true);
    check_close(row["params"], rank0["param_bytes"]);
    check_close(row["grads"], rank0["grad_bytes"]);
    check_close(row["optimizer"], rank0["optimizer_state_bytes"]);
    if (c.precision == "bf16") check_close(row["master"], rank0["master_bytes"]);
  }
}

TEST_CASE("with LoRA the estimate counts the adapter's state and the frozen base as the engine holds them",
          "[integration][estimate][peft]") {
  const std::string dir = dist_dir("estimate_lora");
  write_text(dir + "/lora.yaml",
             "model: {type: gpt, n_layer: 2, n_head: 2, n_embd: 64, dropout: 0.0}\n"
             "data: {type: digit_reversal, num_digits: 4, train_size: 64, eval_size: 16}\n"
             "peft: {r: 4, lora_alpha: 8, target_modules: [c_attn]}\n"
             "training: {output_dir: out, max_steps: 1, save_strategy: \"no\", do_eval: false, eval_strategy: \"no\", "
             "per_device_train_batch_size: 8}\n");
  for (const int stage : {2, 3}) {
    INFO("stage " << stage);
    const std::string sets = " --nproc-per-node 2 --set zero.stage=" + std::to_string(stage) +
                             " --set precision.bf16=true --set zero.stage3_param_persistence_threshold=20";
    CliResult train = run_hftrain("train lora.yaml --set training.output_dir=run" + std::to_string(stage) + sets, dir);
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    const json report = engine_memory_report(train.output);
    REQUIRE(report.is_object());
    const json& rank0 = report["ranks"][0];
    CliResult est = run_hftrain("estimate lora.yaml --json" + sets + " 2>/dev/null", dir);
    INFO(est.output);
    REQUIRE(est.exit_code == 0);
    const json estimate = json::parse(est.output.substr(est.output.find('{')));  // after PEFT's count line
    CHECK(estimate["parameters"] == report["numel"]);  // the engine flattens the adapters only
    const int64_t frozen = estimate["frozen_parameters"].get<int64_t>();
    CHECK(frozen > 20 * estimate["parameters"].get<int64_t>());
    const json row = estimate_row(estimate, stage, "bf16", "none");
    // The engine's param_bytes are the adapters' (a partition at stage 3), its frozen_param_bytes the base's, in
    // bf16 (docs/peft.md): whole at stage 2, a rank's share (and the small tensors whole) at stage 3.
    const int64_t frozen_bytes = rank0["frozen_param_bytes"].get<int64_t>();
    if (stage == 2) CHECK(frozen_bytes == 2 * frozen);
    if (stage == 3) CHECK(frozen_bytes < 2 * frozen * 6 / 10);
    check_close(row["params"], rank0["param_bytes"].get<int64_t>() + frozen_bytes);
    check_close(row["grads"], rank0["grad_bytes"]);
    check_close(row["optimizer"], rank0["optimizer_state_bytes"]);
    check_close(row["master"], rank0["master_bytes"]);
  }
}

TEST_CASE("a Llama-2-7B config.json is sized without its weights and set beside DeepSpeed's formulas",
          "[integration][estimate]") {
  const std::string dir = dist_dir("estimate_7b");
  std::filesystem::create_directories(dir + "/llama7b");
  write_text(dir + "/llama7b/config.json",
             R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008,
                 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                 "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu"})");
  write_text(dir + "/spec.yaml",
             "model: {from_pretrained: llama7b}\n"
             "data: {type: digit_reversal}\n"
             "training: {output_dir: out, per_device_train_batch_size: 4}\n"
             "precision: {bf16: true}\n"
             "zero: {stage: 3}\n");
  CliResult r = run_hftrain("estimate spec.yaml --nproc-per-node 8 --json", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json e = json::parse(r.output);
  const double psi = 6738415616.0, largest = 32000.0 * 4096.0;
  CHECK(e["parameters"] == 6738415616);
  CHECK(e["largest_layer_parameters"] == 131072000);
  // DeepSpeed: ZeRO-3 gpu = 4 largest + 18 psi / gpus; ZeRO-2 gpu = 2 psi + 18 psi / gpus; offload cpu = psi * max(4 gpus, 16) * 1.5.
  const json z3 = estimate_row(e, 3, "bf16", "none"), z2 = estimate_row(e, 2, "bf16", "none");
  CHECK(z3["deepspeed"]["gpu"] == static_cast<int64_t>(4 * largest) + static_cast<int64_t>(18 * psi / 8));
  CHECK(z2["deepspeed"]["gpu"] == static_cast<int64_t>(2 * psi) + static_cast<int64_t>(18 * psi / 8));
  CHECK(estimate_row(e, 2, "bf16", "cpu")["deepspeed"]["cpu_per_node"] == static_cast<int64_t>(psi * 32 * 1.5));
  CHECK(z3["spec_choice"] == true);
  // hftrain's stage-3 bf16 rank: 2-byte parameter and gradient partitions, 4-byte masters, 8-byte Adam state, over 8.
  CHECK(std::abs(static_cast<double>(z3["params"].get<int64_t>() + z3["grads"].get<int64_t>() + z3["master"].get<int64_t>() +
                                     z3["optimizer"].get<int64_t>()) - 16.0 * psi / 8) <= 0.001 * 16.0 * psi / 8);
  // The readable table marks the spec's choice and suggests what fits in 16 GiB per rank (stage 2 needs
  // 2 + 14/8 bytes per parameter = 23.5 GiB; stage 3 16/8 = 12.6 GiB).
  CliResult table = run_hftrain("estimate spec.yaml --nproc-per-node 8 --memory-per-rank 16GiB", dir);
  INFO(table.output);
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("6,738,415,616 parameters"));
  CHECK_THAT(table.output, Catch::Contains("* 3     bf16      none"));
  CHECK_THAT(table.output, Catch::Contains("cheapest configuration that fits: zero.stage 3"));
  CliResult bad = run_hftrain("estimate spec.yaml --memory-per-rank lots", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--memory-per-rank 'lots'"));
}

TEST_CASE("a Llama-3.1-8B config.json with its llama3 rope_scaling is sized at 8.03B parameters",
          "[integration][estimate][rotary]") {
  const std::string dir = dist_dir("estimate_llama31");
  std::filesystem::create_directories(dir + "/llama31");
  // meta-llama/Llama-3.1-8B's config.json as published
  write_text(dir + "/llama31/config.json",
             R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
                 "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
                 "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
                 "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
                 "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
                 "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                 "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
                 "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})");
  write_text(dir + "/spec.yaml",
             "model: {from_pretrained: llama31}\n"
             "data: {type: digit_reversal}\n"
             "training: {output_dir: out, per_device_train_batch_size: 1}\n"
             "precision: {bf16: true}\n"
             "zero: {stage: 3}\n");
  CliResult r = run_hftrain("estimate spec.yaml --nproc-per-node 8", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("8,030,261,248 parameters"));
  CliResult j = run_hftrain("estimate spec.yaml --nproc-per-node 8 --json", dir);
  REQUIRE(j.exit_code == 0);
  const double parameters = json::parse(j.output)["parameters"].get<double>();
  CHECK(std::abs(parameters - 8030261248.0) <= 0.005 * 8030261248.0);
}
