// PEFT adapters meeting their base through the binary: merge-adapter keeps the base's dtype (bf16 stays bf16,
// torch_dtype too) and its generation_config.json as it is (none when it has none), works for hftrain's own gpt
// family (block_size read back from config.json's n_positions), and eval / predict of an adapter run with
// --model BASE load the run's trained adapter onto that base (PeftModel.from_pretrained(base, run)).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kMergeData = "data: {type: digit_reversal, num_digits: 3, train_size: 48, eval_size: 16, test_size: 8}\n";

// dir/base: a model of `model` (a YAML mapping) trained a few steps here, as a pretrained base; `extra`: more
// sections of its spec.
std::string with_base(const std::string& name, const std::string& model, const std::string& extra = "") {
  const std::string dir = fresh_dir(name);
  write_text(dir + "/make.yaml", "model: " + model + "\n" + kMergeData + extra +
                                     "training: {output_dir: base, max_steps: 3, learning_rate: 0.01, save_strategy: \"no\"}\n");
  CliResult r = run_hftrain("train make.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

const char* const kGpt2 = "{type: gpt2, n_layer: 2, n_head: 2, n_embd: 16, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}";

// dir/out: a LoRA run on dir/base (c_attn, the default target of gpt2 and gpt).
void train_lora(const std::string& dir) {
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: base}\n") + kMergeData +
                                     "peft: {r: 4, lora_alpha: 8, init_lora_weights: gaussian}\n"
                                     "training: {output_dir: out, max_steps: 6, learning_rate: 0.05, save_strategy: \"no\"}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// `hftrain <command>` in dir, which must succeed; its output.
bool same_loss(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b)); }

}  // namespace

TEST_CASE("merge-adapter of a bf16 base writes bf16 weights, torch_dtype bfloat16 and no generation_config.json it lacked",
          "[integration][peft]") {
  const std::string dir = with_base("peft_merge_bf16", kGpt2, "precision: {save_dtype: bf16}\n");
  fs::remove(dir + "/base/generation_config.json");  // as many HF directories come
  REQUIRE(json::parse(read_text(dir + "/base/config.json"))["torch_dtype"] == "bfloat16");
  train_lora(dir);
  run_ok("merge-adapter base out merged", dir);

  for (const auto& e : hftrain::read_safetensors_header(dir + "/merged/model.safetensors").tensors) {
    INFO(e.name);
    CHECK(e.dtype == "BF16");
  }
  CHECK(json::parse(read_text(dir + "/merged/config.json"))["torch_dtype"] == "bfloat16");
  CHECK_FALSE(fs::exists(dir + "/merged/generation_config.json"));
  // Tensors the adapter does not touch are the base's bits; the adapted ones moved.
  const auto base = hftrain::load_safetensors(dir + "/base/model.safetensors").tensors;
  const auto merged = hftrain::load_safetensors(dir + "/merged/model.safetensors").tensors;
  REQUIRE(merged.size() == base.size());
  for (const auto& [name, t] : base) {
    INFO(name);
    REQUIRE(merged.count(name));
    if (name.find("c_attn.weight") != std::string::npos) CHECK_FALSE(merged.at(name).equal(t));
    else CHECK(merged.at(name).equal(t));
  }
}

TEST_CASE("merge-adapter of a LoRA on a gpt-family base succeeds and evaluates as the adapter run", "[integration][peft]") {
  // The quickstart's model family: its config.json holds block_size as n_positions.
  const std::string dir = with_base("peft_merge_gpt", "{type: gpt, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0}");
  REQUIRE(fs::exists(dir + "/base/generation_config.json"));
  train_lora(dir);
  run_ok("merge-adapter base out merged", dir);

  const json base_config = json::parse(read_text(dir + "/base/config.json"));
  const json merged_config = json::parse(read_text(dir + "/merged/config.json"));
  CHECK(merged_config["model_type"] == "gpt");
  CHECK(merged_config["n_positions"] == base_config["n_positions"]);
  CHECK(read_bytes(dir + "/merged/generation_config.json") == read_bytes(dir + "/base/generation_config.json"));

  run_ok("eval out", dir);
  write_text(dir + "/merged.yaml", std::string("model: {from_pretrained: merged}\n") + kMergeData + "training: {output_dir: merged_eval}\n");
  run_ok("eval merged.yaml", dir);
  const double adapter_run = eval_loss(dir + "/out/eval_results.json");
  const double merged = eval_loss(dir + "/merged_eval/eval_results.json");
  CHECK(std::abs(adapter_run - merged) <= 1e-5 * std::max(1.0, std::abs(merged)));
}

TEST_CASE("eval and predict of a LoRA run with --model BASE put the run's trained adapter on that base",
          "[integration][peft]") {
  const std::string dir = with_base("peft_eval_model", kGpt2);
  train_lora(dir);
  run_ok("eval out", dir);
  const std::string with_model = run_ok("eval out --model base", dir);
  CHECK_THAT(with_model, Catch::Contains("model weights: the trained adapter"));
  CHECK_THAT(with_model, Catch::Contains("on --model base"));
  write_text(dir + "/base.yaml", std::string("model: {from_pretrained: base}\n") + kMergeData + "training: {output_dir: base_eval}\n");
  run_ok("eval base.yaml", dir);
  const double run = eval_loss(dir + "/out/eval_results.json");
  const double on_base = eval_loss(dir + "/out/results-base/eval_results.json");
  const double base_alone = eval_loss(dir + "/base_eval/eval_results.json");
  CHECK(same_loss(on_base, run));
  CHECK_FALSE(same_loss(base_alone, run));

  // predict prepares the model the same way.
  run_ok("predict out", dir);
  CHECK_THAT(run_ok("predict out --model base", dir), Catch::Contains("model weights: the trained adapter"));
  CHECK(read_bytes(dir + "/out/results-base/predictions.jsonl") == read_bytes(dir + "/out/predictions.jsonl"));

  // A LoRA spec whose output directory holds no trained adapter says so.
  CliResult none = run_hftrain("eval spec.yaml --model base --set training.output_dir=untrained", dir);
  INFO(none.output);
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Catch::Contains("holds no adapter_model.safetensors"));

  // A run continuing an adapter (model.peft_adapter) evaluates its own trained adapter, not the one it started from.
  write_text(dir + "/more.yaml", std::string("model: {from_pretrained: base, peft_adapter: out}\n") + kMergeData +
                                     "training: {output_dir: more, max_steps: 3, learning_rate: 0.05, save_strategy: \"no\"}\n");
  run_ok("train more.yaml", dir);
  run_ok("eval more", dir);
  run_ok("eval more --model base", dir);
  const double more = eval_loss(dir + "/more/eval_results.json");
  CHECK(same_loss(eval_loss(dir + "/more/results-base/eval_results.json"), more));
  CHECK_FALSE(same_loss(more, run));
}
