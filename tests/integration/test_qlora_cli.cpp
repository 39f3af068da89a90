// QLoRA through the binary: a llama from_pretrained with model.quantization_config (4-bit NF4 / FP4 base) and a
// peft section trains its adapters (eval loss falls, PEFT's files only), eval of the run equals eval of
// merge-adapter's output (the adapter merged into the dequantised base, saved in the compute dtype), bf16 DoRA
// over an FP4 base runs, estimate counts the 4-bit bytes, and what is not built is refused by name. A base saved
// 4-bit in bitsandbytes' layout trains exactly as quantising it at load does, and merge-adapter merges over it.
// An 8-bit (LLM.int8()) base trains, merges and is estimated at a byte a weight. At ZeRO-3 on 2 workers the
// quantised storage is partitioned with the frozen base and a 4-bit or 8-bit run follows 1 worker at stage 0.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cctype>
#include <filesystem>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "cli_runner.h"
#include "test_dist_helpers.h"
#include "models/quantize_model.h"
#include "train/model_and_data.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kQloraData = "data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 16, test_size: 4}\n";
const char* const kQuant = "quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true}";

// dir/base: a tiny llama trained a few steps, as a pretrained base.
std::string with_llama_base(const std::string& name) {
  const std::string dir = fresh_dir(name);
  write_text(dir + "/make.yaml", std::string("model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, "
                                             "num_attention_heads: 4, num_key_value_heads: 2}\n") + kQloraData +
                                     "training: {output_dir: base, max_steps: 30, learning_rate: 0.01, save_strategy: \"no\", "
                                     "do_eval: false, seed: 3}\n");
  run_ok("train make.yaml", dir);
  return dir;
}

}  // namespace

TEST_CASE("QLoRA: adapters train over a 4-bit llama, save in PEFT's layout and merge into the dequantised base",
          "[integration][peft][qlora]") {
  const std::string dir = with_llama_base("qlora_cli");
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: base, ") + kQuant + "}\n" + kQloraData +
                                     "peft: {r: 8, lora_alpha: 16, target_modules: all-linear}\n"
                                     "training: {output_dir: out, max_steps: 40, learning_rate: 0.02, save_strategy: \"no\", seed: 5}\n");
  const std::string trained = run_ok("train spec.yaml", dir);
  CHECK_THAT(trained, Catch::Contains("quantization: 14 linear layers quantised to 4 bits"));
  CHECK_THAT(trained, Catch::Contains("trainable params:"));
  CHECK(fs::exists(dir + "/out/adapter_model.safetensors"));
  CHECK(fs::exists(dir + "/out/adapter_config.json"));
  CHECK_FALSE(fs::exists(dir + "/out/model.safetensors"));
  for (const auto& e : hftrain::read_safetensors_header(dir + "/out/adapter_model.safetensors").tensors) {
    INFO(e.name);
    CHECK(e.name.rfind("base_model.model.model.layers.", 0) == 0);
    CHECK(e.name.find(".lora_") != std::string::npos);
  }

  // the quantised base alone (no adapter: evaluation only) against the trained adapters
  write_text(dir + "/quantised.yaml", std::string("model: {from_pretrained: base, ") + kQuant + "}\n" + kQloraData +
                                          "training: {output_dir: quantised_eval}\n");
  run_ok("eval quantised.yaml", dir);
  const double run = eval_loss(dir + "/out/eval_results.json");
  CHECK(run < eval_loss(dir + "/quantised_eval/eval_results.json"));

  // merge-adapter reads the run's quantization_config: W_dequantised + s B A, float32 (the compute dtype)
  const std::string merged = run_ok("merge-adapter base out merged", dir);
  CHECK_THAT(merged, Catch::Contains("merged dequantised"));
  const auto base = hftrain::load_safetensors(dir + "/base/model.safetensors").tensors;
  const auto merged_weights = hftrain::load_safetensors(dir + "/merged/model.safetensors").tensors;
  REQUIRE(merged_weights.size() == base.size());
  for (const auto& [name, t] : base) {
    INFO(name);
    REQUIRE(merged_weights.count(name));
    CHECK(merged_weights.at(name).scalar_type() == torch::kFloat);
    const bool linear = name.find("_proj.weight") != std::string::npos;
    CHECK(merged_weights.at(name).equal(t) == !linear);
  }
  write_text(dir + "/merged.yaml", std::string("model: {from_pretrained: merged}\n") + kQloraData + "training: {output_dir: merged_eval}\n");
  run_ok("eval merged.yaml", dir);
  CHECK(std::abs(eval_loss(dir + "/merged_eval/eval_results.json") - run) <= 1e-5 * std::max(1.0, std::abs(run)));

  // estimate: the base in 4 bits
  CliResult est = run_hftrain("estimate spec.yaml --json 2>/dev/null", dir);
  INFO(est.output);
  REQUIRE(est.exit_code == 0);
  const json e = json::parse(est.output.substr(est.output.find('{')));
  const int64_t quantised = e["quantized_parameters"].get<int64_t>();
  CHECK(quantised == 2 * (2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32));  // q, o; k, v; gate, up, down of two layers
  // codes, one 8-bit absmax per 64 weights and a float per 256 of those (per layer, rounded up)
  CHECK(e["quantized_bytes"].get<int64_t>() == quantised / 2 + quantised / 64 + 14 * 4);
}

TEST_CASE("QLoRA: bf16 DoRA over an FP4 base trains (at ZeRO-3 too), and what is not built is refused naming the key",
          "[integration][peft][qlora]") {
  const std::string dir = with_llama_base("qlora_refusals");
  write_text(dir + "/dora.yaml", std::string("model: {from_pretrained: base, quantization_config: {load_in_4bit: true, "
                                             "bnb_4bit_compute_dtype: bfloat16}}\n") + kQloraData +
                                     "peft: {r: 4, lora_alpha: 8, use_dora: true, target_modules: [q_proj, v_proj, down_proj]}\n"
                                     "precision: {bf16: true}\n"
                                     "training: {output_dir: dora, max_steps: 4, learning_rate: 0.02, save_strategy: \"no\"}\n");
  run_ok("train dora.yaml", dir);
  CHECK(fs::exists(dir + "/dora/adapter_model.safetensors"));

  write_text(dir + "/full.yaml", std::string("model: {from_pretrained: base, ") + kQuant + "}\n" + kQloraData +
                                     "training: {output_dir: full, max_steps: 2}\n");
  CliResult full = run_hftrain("train full.yaml", dir);
  CHECK(full.exit_code == 2);
  CHECK_THAT(full.output, Catch::Contains("model.quantization_config") && Catch::Contains("peft section"));
  // ZeRO-3 with zero3_init_flag: an adapter run does not build its base sharded (logged); the engine then partitions
  // the codes and scales with the rest of the frozen base
  const std::string sharded = run_ok("train dora.yaml --set zero.stage=3 --set zero.zero3_init_flag=true --set training.output_dir=dora3", dir);
  CHECK_THAT(sharded, Catch::Contains("the base model is built whole on each rank"));
  CHECK_THAT(sharded, Catch::Contains("parameters gathered per module"));
  CHECK(fs::exists(dir + "/dora3/adapter_model.safetensors"));
  CliResult both = run_hftrain("train dora.yaml --set model.quantization_config.load_in_8bit=true --set training.output_dir=dora8", dir);
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.output, Catch::Contains("model.quantization_config.load_in_8bit") && Catch::Contains("both true"));
}

TEST_CASE("QLoRA: a base saved 4-bit in bitsandbytes' layout trains as quantising it at load does, and merges",
          "[integration][peft][qlora]") {
  const std::string dir = with_llama_base("qlora_prequantized");
  {  // base4bit: the base quantised (NF4, double quantisation) and saved as a 4-bit model is
    const hftrain::Components& c = hftrain::builtin_components();
    const hftrain::RunSpec spec = hftrain::load_run_spec_text(
        "model: {from_pretrained: '" + dir + "/base', " + kQuant + "}\n" + kQloraData + "training: {output_dir: x}\n", "spec", c.catalog());
    std::shared_ptr<hftrain::Model> model = c.models.build(spec.model.type, spec.model.options, hftrain::ModelContext{});
    hftrain::keep_loaded_config(*model, dir + "/base");
    hftrain::load_pretrained(dir + "/base", *model);
    hftrain::quantize_linear_layers(*model, *spec.model.quantization);
    hftrain::save_model_dir(dir + "/base4bit", *model);
  }
  const json saved = json::parse(read_text(dir + "/base4bit/config.json"));
  CHECK(saved["quantization_config"]["bnb_4bit_quant_type"] == "nf4");
  const std::string rest = std::string(kQloraData) + "peft: {r: 8, lora_alpha: 16, target_modules: all-linear}\n"
                           "training: {max_steps: 10, learning_rate: 0.02, save_strategy: \"no\", seed: 5, output_dir: ";
  write_text(dir + "/pre.yaml", "model: {from_pretrained: base4bit}\n" + rest + "pre}\n");
  write_text(dir + "/load.yaml", std::string("model: {from_pretrained: base, ") + kQuant + "}\n" + rest + "load}\n");
  const std::string pre = run_ok("train pre.yaml", dir);
  run_ok("train load.yaml", dir);
  CHECK_THAT(pre, Catch::Contains("quantization: 14 linear layers"));
  CHECK(eval_loss(dir + "/pre/eval_results.json") == eval_loss(dir + "/load/eval_results.json"));  // the same codes
  // the parameter count is the logical one: the base's weights and the adapters
  int64_t base = 0;
  for (const auto& [name, t] : hftrain::load_safetensors(dir + "/base/model.safetensors").tensors) base += t.numel();
  const auto at = pre.find("Number of trainable parameters = ");
  REQUIRE(at != std::string::npos);
  std::string trainable, total;
  for (std::size_t i = at + 33; std::isdigit(static_cast<unsigned char>(pre[i])) || pre[i] == ','; ++i) trainable += pre[i] == ',' ? "" : std::string(1, pre[i]);
  for (std::size_t i = pre.find("(total ", at) + 7; std::isdigit(static_cast<unsigned char>(pre[i])) || pre[i] == ','; ++i) total += pre[i] == ',' ? "" : std::string(1, pre[i]);
  CHECK(std::stoll(total) == base + std::stoll(trainable));
  // merge-adapter over the 4-bit base: merged into its dequantised weights, saved as a plain model
  run_ok("merge-adapter base4bit pre merged", dir);
  const json merged = json::parse(read_text(dir + "/merged/config.json"));
  CHECK_FALSE(merged.contains("quantization_config"));
  for (const auto& e : hftrain::read_safetensors_header(dir + "/merged/model.safetensors").tensors) {
    INFO(e.name);
    CHECK(e.dtype == "F32");
    CHECK(e.name.find(".absmax") == std::string::npos);
  }
  write_text(dir + "/merged.yaml", std::string("model: {from_pretrained: merged}\n") + kQloraData + "training: {output_dir: merged_eval}\n");
  run_ok("eval merged.yaml", dir);
  const double run = eval_loss(dir + "/pre/eval_results.json");
  CHECK(std::abs(eval_loss(dir + "/merged_eval/eval_results.json") - run) <= 1e-5 * std::max(1.0, std::abs(run)));
}

TEST_CASE("QLoRA 8-bit: adapters train over an LLM.int8() llama, merge into the dequantised base, estimate counts a byte a weight",
          "[integration][peft][qlora][int8]") {
  const std::string dir = with_llama_base("qlora8_cli");
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: base, quantization_config: {load_in_8bit: true}}\n") + kQloraData +
                                     "peft: {r: 8, lora_alpha: 16, target_modules: all-linear}\n"
                                     "training: {output_dir: out, max_steps: 40, learning_rate: 0.02, save_strategy: \"no\", seed: 5}\n");
  CHECK_THAT(run_ok("train spec.yaml", dir), Catch::Contains("quantization: 14 linear layers quantised to 8 bits"));
  CHECK(fs::exists(dir + "/out/adapter_model.safetensors"));
  CHECK_FALSE(fs::exists(dir + "/out/model.safetensors"));
  write_text(dir + "/quantised.yaml", "model: {from_pretrained: base, quantization_config: {load_in_8bit: true}}\n" +
                                          std::string(kQloraData) + "training: {output_dir: quantised_eval}\n");
  run_ok("eval quantised.yaml", dir);
  const double run = eval_loss(dir + "/out/eval_results.json");
  CHECK(run < eval_loss(dir + "/quantised_eval/eval_results.json"));

  // merged into the dequantised base: the products then skip the activations' int8 rounding, so the loss is close
  // to the run's, not equal
  CHECK_THAT(run_ok("merge-adapter base out merged", dir), Catch::Contains("merged dequantised"));
  write_text(dir + "/merged.yaml", std::string("model: {from_pretrained: merged}\n") + kQloraData + "training: {output_dir: merged_eval}\n");
  run_ok("eval merged.yaml", dir);
  CHECK(std::abs(eval_loss(dir + "/merged_eval/eval_results.json") - run) <= 0.02 * std::max(1.0, std::abs(run)));

  CliResult est = run_hftrain("estimate spec.yaml --json 2>/dev/null", dir);
  INFO(est.output);
  REQUIRE(est.exit_code == 0);
  const json e = json::parse(est.output.substr(est.output.find('{')));
  const int64_t quantised = e["quantized_parameters"].get<int64_t>();
  CHECK(quantised == 2 * (2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32));
  CHECK(e["quantized_bytes"].get<int64_t>() == quantised + 4 * 2 * (32 + 16 + 16 + 32 + 64 + 64 + 32));  // codes, a float a row
}

namespace {

// A QLoRA run at ZeRO-3 on 2 workers against 1 worker at stage 0 over the same global batch (one row a micro-batch,
// so that LLM.int8()'s outlier columns, chosen per batch, are the same): loss and grad_norm per step, the adapter.
// `two_workers` adds settings to the 2-worker run. Returns its output.
std::string qlora_zero3_follows_one_worker(const std::string& dir, const std::string& quantization, const std::string& two_workers = "") {
  write_text(dir + "/z3.yaml", "model: {from_pretrained: base, quantization_config: " + quantization + "}\n" + kQloraData +
                                   "peft: {r: 4, lora_alpha: 8, target_modules: all-linear, init_lora_weights: gaussian}\n"
                                   "training: {output_dir: one, max_steps: 4, learning_rate: 0.02, per_device_train_batch_size: 1, "
                                   "gradient_accumulation_steps: 4, logging_steps: 1, max_grad_norm: 1.0, save_strategy: \"no\", "
                                   "seed: 5}\n"
                                   "distributed: {ddp_timeout: 60}\nzero: {stage3_param_persistence_threshold: 0}\n");
  run_ok("train z3.yaml", dir);
  CliResult two = run_hftrain("train z3.yaml --nproc-per-node 2 --set zero.stage=3 --set training.gradient_accumulation_steps=2 "
                              "--set training.output_dir=two " + two_workers, dir);
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK_THAT(two.output, Catch::Contains("parameters gathered per module"));
  const std::vector<json> expected = train_logs(dir + "/one/trainer_state.json"), got = train_logs(dir + "/two/trainer_state.json");
  REQUIRE(got.size() == 4);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << got[i]["step"]);
    CHECK(got[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-4));
    CHECK(got[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
  }
  const auto a = hftrain::load_safetensors(dir + "/one/adapter_model.safetensors").tensors;
  const auto b = hftrain::load_safetensors(dir + "/two/adapter_model.safetensors").tensors;
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK((b.at(name) - t).abs().max().item<double>() <= 1e-4 * std::max(1.0, t.abs().max().item<double>()));
  }
  return two.output;
}

// Each rank's frozen bytes in the engine's memory report: with the threshold at 0 every frozen tensor (the fp32 norms,
// embeddings and head, the codes and scales) is partitioned, so the two halves hold the whole base once, plus at
// most 3 elements of padding per flat group (a group per gather unit and dtype).
void check_frozen_halves(const std::string& output, int64_t whole_bytes) {
  const json report = engine_memory_report(output);
  REQUIRE(report.is_object());
  REQUIRE(report["ranks"].size() == 2);
  for (const json& rank : report["ranks"]) {
    const int64_t frozen = rank["frozen_param_bytes"].get<int64_t>();
    INFO("rank " << rank["rank"] << " frozen bytes " << frozen << " of " << whole_bytes);
    CHECK(2 * frozen >= whole_bytes);
    CHECK(2 * frozen <= whole_bytes + 4 * 3 * 4 * 3);  // 4 units, 3 dtypes, 3 float32 elements of padding
    // gathered at once: never more than the whole model, codes counted at their own bytes (not as float32)
    const int64_t peak = rank["param_gathered_peak_bytes"].get<int64_t>();
    CHECK(peak > 0);
    CHECK(peak <= whole_bytes + 4 * 3 * 4 * 3 + 4 * report["padded_numel"].get<int64_t>());
  }
}

int64_t fp32_frozen_bytes(const std::string& base_dir, int64_t quantised_elements) {
  int64_t elements = 0;
  for (const auto& [name, t] : hftrain::load_safetensors(base_dir + "/model.safetensors").tensors) elements += t.numel();
  return 4 * (elements - quantised_elements);
}

}  // namespace

TEST_CASE("QLoRA at ZeRO-3 on 2 workers partitions the 4-bit storage and follows 1 worker at stage 0",
          "[integration][peft][qlora][zero3]") {
  const std::string dir = with_llama_base("qlora_zero3_nf4");
  // with gradient checkpointing: the recomputation gathers the codes and scales again in backward
  const std::string output = qlora_zero3_follows_one_worker(
      dir, "{load_in_4bit: true, bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true}", "--set training.gradient_checkpointing=true");
  // evaluation after training runs through the gathered base too (4 bits: rows are independent, so the loss is the
  // same whatever the ranks' batches)
  const double eval_one = eval_loss(dir + "/one/eval_results.json");
  CHECK(std::abs(eval_loss(dir + "/two/eval_results.json") - eval_one) <= 1e-5 * std::abs(eval_one));
  const int64_t quantised = 2 * (2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32);
  const int64_t storage = quantised / 2 + quantised / 64 + 14 * 4;  // codes, 8-bit absmax, a float per 256 of those
  check_frozen_halves(output, fp32_frozen_bytes(dir + "/base", quantised) + storage);

  // estimate: one rank's parameters at stage 3 on 2 workers are half of stage 0's, the 4-bit bytes included
  CliResult est = run_hftrain("estimate z3.yaml --nproc-per-node 2 --json 2>/dev/null", dir);
  INFO(est.output);
  REQUIRE(est.exit_code == 0);
  const json e = json::parse(est.output.substr(est.output.find('{')));
  CHECK(e["quantized_bytes"].get<int64_t>() == storage);
  std::map<int, int64_t> params;
  for (const json& row : e["rows"])
    if (row["precision"] == "fp32" && row["offload"] == "none") params[row["stage"].get<int>()] = row["params"].get<int64_t>();
  REQUIRE(params.count(0));
  REQUIRE(params.count(3));
  CHECK(2 * params[3] == params[0]);
  fs::remove_all(dir);
}

TEST_CASE("QLoRA at ZeRO-3 on 2 workers partitions the 8-bit storage, follows 1 worker at stage 0 and resumes",
          "[integration][peft][qlora][int8][zero3]") {
  const std::string dir = with_llama_base("qlora_zero3_int8");
  const std::string output =
      qlora_zero3_follows_one_worker(dir, "{load_in_8bit: true}", "--set training.save_strategy=steps --set training.save_steps=2");
  const int64_t quantised = 2 * (2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32);
  const int64_t storage = quantised + 4 * 2 * (32 + 16 + 16 + 32 + 64 + 64 + 32);  // int8 codes, a float a row
  check_frozen_halves(output, fp32_frozen_bytes(dir + "/base", quantised) + storage);

  // its checkpoint (the adapters' shards; the base is not saved) resumes at stage 3 to the same steps
  run_ok("train z3.yaml --nproc-per-node 2 --set zero.stage=3 --set training.gradient_accumulation_steps=2 "
         "--set training.output_dir=resumed --set training.resume_from_checkpoint=two/checkpoint-2", dir);
  const std::vector<json> whole = train_logs(dir + "/two/trainer_state.json"), resumed = train_logs(dir + "/resumed/trainer_state.json");
  REQUIRE(resumed.size() == whole.size());
  for (std::size_t i = 2; i < resumed.size(); ++i) {
    INFO("step " << resumed[i]["step"]);
    CHECK(resumed[i]["loss"].get<double>() == Approx(whole[i]["loss"].get<double>()).epsilon(1e-6));
  }
  fs::remove_all(dir);
}
