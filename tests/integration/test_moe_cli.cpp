// The mixture-of-experts families through the real binary: a tiny mixtral with the load-balancing loss trains at
// ZeRO-3 on 2 workers (each rank routing its own tokens, so their experts differ) as 1 process at stage 0 does
// over the same global batch, with a short ddp_timeout so a collective that disagreed would fail, not hang, and
// logs the load-balancing loss apart as aux_loss; and
// `hftrain estimate` sizes the published Mixtral-8x7B config.json at its total and active parameter counts.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

TEST_CASE("a tiny mixtral with the load-balancing loss at ZeRO-3 on 2 workers follows 1 worker", "[integration][moe][zero3]") {
  const std::string dir = dist_dir("moe_zero3");
  write_text(dir + "/spec.yaml",
             "model: {type: mixtral, hidden_size: 16, intermediate_size: 16, num_hidden_layers: 2, num_attention_heads: 4, "
             "num_key_value_heads: 2, num_local_experts: 4, num_experts_per_tok: 2, output_router_logits: true, "
             "router_aux_loss_coef: 0.1}\n"
             "data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 8, test_size: 0}\n"
             "training: {output_dir: out, per_device_train_batch_size: 1, gradient_accumulation_steps: 8, max_steps: 5, "
             "learning_rate: 0.003, max_grad_norm: 1.0, logging_steps: 1, save_strategy: \"no\", do_eval: false}\n"
             "distributed: {ddp_timeout: 60}\n"
             "zero: {stage3_param_persistence_threshold: 20}\n");
  CliResult ref = run_hftrain("train spec.yaml --set training.output_dir=ref", dir);
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  // one row per micro-batch: the ranks' micro-batches are the single process's, so the load-balancing loss (not
  // additive over rows) is too
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set training.gradient_accumulation_steps=4 "
                            "--set training.output_dir=z3", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("parameters gathered per module"));
  const std::vector<json> expected = train_logs(dir + "/ref/trainer_state.json"), got = train_logs(dir + "/z3/trainer_state.json");
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << got[i]["step"]);
    CHECK(got[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-4));
    CHECK(got[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
    REQUIRE(got[i].contains("aux_loss"));  // logged apart, the mean over the ranks' micro-batches
    CHECK(got[i]["aux_loss"].get<double>() == Approx(expected[i]["aux_loss"].get<double>()).epsilon(1e-3));
  }
  fs::remove_all(dir);
}

TEST_CASE("the published Mixtral-8x7B config.json is sized at its total and active parameter counts",
          "[integration][estimate][moe]") {
  const std::string dir = fresh_dir("estimate_mixtral");
  fs::create_directories(dir + "/mixtral");
  write_text(dir + "/mixtral/config.json",  // as published on the hub
             R"({"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
                 "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
                 "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
                 "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
                 "output_router_logits": false, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
                 "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false,
                 "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})");
  write_text(dir + "/mixtral.yaml", "model: {from_pretrained: mixtral}\ndata: {type: digit_reversal}\n"
                                    "training: {output_dir: out, per_device_train_batch_size: 1}\n"
                                    "precision: {bf16: true}\nzero: {stage: 3}\n");
  CliResult r = run_hftrain("estimate mixtral.yaml --nproc-per-node 8 --json", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json estimate = json::parse(r.output);
  CHECK(std::abs(estimate["parameters"].get<double>() - 46702792704.0) <= 0.005 * 46702792704.0);
  CHECK(std::abs(estimate["active_parameters"].get<double>() - 12879925248.0) <= 0.005 * 12879925248.0);
  CliResult text = run_hftrain("estimate mixtral.yaml --nproc-per-node 8", dir);
  CHECK_THAT(text.output, Catch::Contains("active per token"));
  fs::remove_all(dir);
}
