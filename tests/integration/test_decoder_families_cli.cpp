// The llama-like families on the shared decoder (qwen2, qwen3, mistral, gemma, phi3, gemma2, gemma3_text) through the
// real binary: each trains from a pretrained directory (its sliding window binding on the data's sequences), saves, and
// the saved directory evaluates to the loss the run ended with; each trains at ZeRO-3 on 2 workers as 1 process does; `hftrain estimate` sizes the published config.json of
// Qwen2.5-7B, Qwen3-8B, Mistral-7B-v0.1, gemma-7b, Phi-3-mini-4k-instruct, gemma-2-9b-it and gemma-3-1b-it at their
// published parameter counts.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

#include "test_dist_helpers.h"

using namespace hftrain_test;
using json = nlohmann::json;

namespace {

std::string spec_for(const std::string& model, const std::string& output_dir, int steps) {
  return "model: " + model + "\n" +
         "data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 16, test_size: 4}\n"
         "training: {output_dir: " + output_dir + ", per_device_train_batch_size: 16, max_steps: " + std::to_string(steps) +
         ", learning_rate: 0.003, save_strategy: \"no\", seed: 7}\n"
         "generation: {max_new_tokens: 3}\n";
}

}  // namespace

TEST_CASE("qwen2, qwen3, mistral, gemma, phi3, gemma2 and gemma3_text: from_pretrained, train, save, and the saved "
          "directory evaluates equal",
          "[integration][hfmodels][decoder_families]") {
  const std::string tiny = "hidden_size: 16, intermediate_size: 32, num_hidden_layers: 2, num_attention_heads: 4, "
                           "num_key_value_heads: 2";
  for (const auto& [type, extra] : std::vector<std::pair<std::string, std::string>>{
           {"qwen2", "use_sliding_window: true, sliding_window: 3, max_window_layers: 1"},
           {"qwen3", "head_dim: 6"},
           {"mistral", "sliding_window: 3"},
           {"gemma", "head_dim: 6"},
           {"phi3", "sliding_window: 3, partial_rotary_factor: 0.5"},
           {"gemma2", "head_dim: 6, sliding_window: 3, attn_logit_softcapping: 2.0, final_logit_softcapping: 5.0"},
           {"gemma3_text", "head_dim: 6, sliding_window: 3, sliding_window_pattern: 2, rope_local_base_freq: 100.0"}}) {
    INFO(type);
    const std::string dir = fresh_dir("decoder_family_" + type);
    write_text(dir + "/make.yaml", spec_for("{type: " + type + ", " + tiny + ", " + extra + "}", "pretrained", 2));
    CliResult made = run_hftrain("train make.yaml --set training.do_eval=false", dir);
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    CHECK(json::parse(read_text(dir + "/pretrained/config.json"))["model_type"] == type);

    write_text(dir + "/spec.yaml", spec_for("{from_pretrained: pretrained}", "out", 4));
    CliResult trained = run_hftrain("train spec.yaml", dir);
    INFO(trained.output);
    REQUIRE(trained.exit_code == 0);
    write_text(dir + "/reload.yaml", spec_for("{from_pretrained: out}", "reloaded", 4));
    CliResult reloaded = run_hftrain("eval reload.yaml", dir);
    INFO(reloaded.output);
    REQUIRE(reloaded.exit_code == 0);
    CHECK(eval_loss(dir + "/reloaded/eval_results.json") == Approx(eval_loss(dir + "/out/eval_results.json")).epsilon(1e-9));
  }
}

TEST_CASE("qwen2, qwen3, mistral, phi3, gemma2 and gemma3_text at ZeRO-3 on 2 workers follow 1 worker",
          "[integration][decoder_families][zero3]") {
  const std::string tiny = "hidden_size: 16, intermediate_size: 32, num_hidden_layers: 2, num_attention_heads: 4, "
                           "num_key_value_heads: 2";
  for (const auto& [type, extra] : std::vector<std::pair<std::string, std::string>>{
           {"qwen2", "use_sliding_window: true, sliding_window: 3, max_window_layers: 1"},
           {"qwen3", "head_dim: 6"},
           {"mistral", "sliding_window: 3"},
           {"phi3", "sliding_window: 3, partial_rotary_factor: 0.5"},
           {"gemma2", "head_dim: 6, sliding_window: 3, attn_logit_softcapping: 2.0, final_logit_softcapping: 5.0"},
           {"gemma3_text", "head_dim: 6, sliding_window: 3, sliding_window_pattern: 2"}}) {
    INFO(type);
    const std::string dir = fresh_dir("decoder_family_zero3_" + type);
    write_text(dir + "/spec.yaml",
               "model: {type: " + type + ", " + tiny + ", " + extra + "}\n"
               "data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 0, test_size: 0}\n"
               "training: {output_dir: out, per_device_train_batch_size: 4, gradient_accumulation_steps: 2, max_steps: 3, "
               "learning_rate: 0.003, max_grad_norm: 1.0, logging_steps: 1, save_strategy: \"no\", do_eval: false, seed: 7}\n"
               "distributed: {ddp_timeout: 60}\n");
    CliResult one = run_hftrain("train spec.yaml --set training.output_dir=one", dir);
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    CliResult two = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set "
                                "training.per_device_train_batch_size=2 --set training.output_dir=two", dir);
    INFO(two.output);
    REQUIRE(two.exit_code == 0);
    const std::vector<json> expected = train_logs(dir + "/one/trainer_state.json"),
                            got = train_logs(dir + "/two/trainer_state.json");
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("step " << got[i]["step"]);
      CHECK(got[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-4));
      CHECK(got[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
    }
  }
}

TEST_CASE("published Qwen2.5-7B, Qwen3-8B, Mistral-7B-v0.1, gemma-7b, Phi-3-mini, gemma-2-9b and gemma-3-1b config.json files "
          "are sized at their parameter counts",
          "[integration][estimate][decoder_families]") {
  const std::string dir = fresh_dir("estimate_decoder_families");
  // the hub's config.json files as published
  const std::vector<std::tuple<std::string, std::string, double>> models = {
      {"qwen25_7b",
       R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
           "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
           "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
           "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
           "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 152064})",
       7615616512.0},
      {"qwen3_8b",
       R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
           "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
           "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
           "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
           "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": false,
           "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
           "vocab_size": 151936})",
       8190735360.0},
      {"mistral_7b",
       R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
           "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
           "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
           "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
           "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})",
       7241732096.0},
      {"gemma_7b",
       R"({"architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 2,
           "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072, "initializer_range": 0.02,
           "intermediate_size": 24576, "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 16,
           "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0, "rms_norm_eps": 1e-06,
           "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0",
           "use_cache": true, "vocab_size": 256000})",
       8537680896.0},
      {"phi3_mini",
       R"({"architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0,
           "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config", "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
           "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
           "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
           "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
           "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
           "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true, "vocab_size": 32064})",
       3821079552.0},
      {"gemma2_9b",
       R"({"architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
           "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
           "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "initializer_range": 0.02,
           "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
           "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
           "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "sliding_window_size": 4096,
           "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0", "use_cache": true, "vocab_size": 256000})",
       9241705984.0},
      {"gemma3_1b",
       R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
           "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
           "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
           "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
           "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
           "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
           "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})",
       999885952.0}};
  for (const auto& [name, config, published] : models) {
    INFO(name);
    std::filesystem::create_directories(dir + "/" + name);
    write_text(dir + "/" + name + "/config.json", config);
    write_text(dir + "/" + name + ".yaml", "model: {from_pretrained: " + name + "}\ndata: {type: digit_reversal}\n"
                                           "training: {output_dir: out, per_device_train_batch_size: 1}\n"
                                           "precision: {bf16: true}\nzero: {stage: 3}\n");
    CliResult r = run_hftrain("estimate " + name + ".yaml --nproc-per-node 8 --json", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const double parameters = json::parse(r.output)["parameters"].get<double>();
    CHECK(std::abs(parameters - published) <= 0.005 * published);
  }
}
