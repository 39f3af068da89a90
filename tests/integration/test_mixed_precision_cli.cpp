// bf16 mixed precision through the real binary: training and evaluation work and learn, resume is
// bitwise exact (one process and two ZeRO-2 workers), a forced gradient overflow skips the step without
// advancing the schedule, saved weights are the fp32 masters (or bf16 when asked), checkpoints move
// between precisions as documented, and the refused combinations exit 2 before anything is written.
#include <catch2/catch.hpp>

#include "checkpoint/safetensors.h"
#include "test_checkpoint_helpers.h"
#include "test_tensor_files.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A small gpt on digit_reversal in bf16; `save_steps` > 0 saves checkpoints every so many steps.
std::string bf16_spec(int64_t max_steps, int64_t save_steps = 0, bool do_eval = false, const std::string& extra = "") {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32, dropout: 0.1}\n"
         "data: {type: digit_reversal, num_digits: 3, train_size: 240, eval_size: 64, test_size: 8}\n"
         "precision: {bf16: true}\n" + extra +
         "training:\n"
         "  output_dir: out\n"
         "  per_device_train_batch_size: 6\n"
         "  gradient_accumulation_steps: 2\n"
         "  max_steps: " + std::to_string(max_steps) + "\n"
         "  learning_rate: 0.003\n"
         "  warmup_steps: 4\n"
         "  weight_decay: 0.01\n"
         "  max_grad_norm: 1.0\n"
         "  logging_steps: 1\n" +
         (save_steps > 0 ? "  save_strategy: steps\n  save_steps: " + std::to_string(save_steps) + "\n"
                         : std::string("  save_strategy: \"no\"\n")) +
         "  do_eval: " + (do_eval ? "true" : "false") + "\n";
}

hftrain::SafetensorsFile load(const std::string& path) { return hftrain::load_safetensors(path); }

}  // namespace

TEST_CASE("bf16 training: fp32 masters saved, bf16 on request, the engine says what it holds", "[integration][precision]") {
  const std::string dir = scratch_dir("bf16_basic");
  write_text(dir + "/spec.yaml", bf16_spec(6, 0, true));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("bf16 parameters and gradients, fp32 master weights"));
  CHECK_THAT(r.output, Catch::Contains("eval_loss"));
  auto saved = load(dir + "/out/model.safetensors");
  for (const auto& [name, t] : saved.tensors) {
    INFO(name);
    CHECK(t.scalar_type() == torch::kFloat32);
  }
  // The fp32 weights are the masters: rounding them gives the bf16 weights the model computed with,
  // and they are not all representable in bf16 (the masters carry more bits).
  const auto& w = saved.tensors.at("transformer.h.0.mlp.c_fc.weight");
  CHECK_FALSE(torch::equal(w, w.to(torch::kBFloat16).to(torch::kFloat32)));

  CliResult r16 = run_hftrain("train spec.yaml --set precision.save_dtype=bf16 --set training.output_dir=out16", dir);
  INFO(r16.output);
  REQUIRE(r16.exit_code == 0);
  auto saved16 = load(dir + "/out16/model.safetensors");
  CHECK(saved16.tensors.at("transformer.h.0.mlp.c_fc.weight").scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(saved16.tensors.at("transformer.h.0.mlp.c_fc.weight"), w.to(torch::kBFloat16)));
  // eval and predict run on the saved bf16 weights
  CliResult ev = run_hftrain("eval out16", dir);
  INFO(ev.output);
  CHECK(ev.exit_code == 0);
  CliResult full = run_hftrain("eval out --set training.bf16_full_eval=true", dir);
  INFO(full.output);
  CHECK(full.exit_code == 0);
  CHECK_THAT(full.output, Catch::Contains("model in bf16"));
}

TEST_CASE("every model family trains in bf16 with finite losses and no skipped steps", "[integration][precision]") {
  const std::string dir = scratch_dir("bf16_families");
  std::string csv = "sentence,label\n";
  for (int i = 0; i < 24; ++i) csv += std::string(i % 2 ? "good fine nice " : "bad awful poor ") + std::to_string(i) + "," + (i % 2 ? "pos" : "neg") + "\n";
  write_text(dir + "/train.csv", csv);
  const std::string lm_data = "data: {type: digit_reversal, num_digits: 3, train_size: 48, eval_size: 16, test_size: 2}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpt2", "model: {type: gpt2, n_embd: 32, n_layer: 1, n_head: 2}\n" + lm_data},
      {"llama", "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 4, "
                "num_key_value_heads: 2}\n" + lm_data},
      {"bert", "model: {type: bert, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2}\n"
               "data: {type: csv, train_file: train.csv, validation_split_percentage: 25, task: sequence_classification, "
               "text_column: sentence, max_length: 16}\n"},
      {"mlp", "model: {type: mlp, hidden_sizes: [16]}\ndata: {type: gaussian_blobs, train_size: 64, eval_size: 16, test_size: 2}\n"}};
  for (const auto& [name, head] : cases) {
    write_text(dir + "/" + name + ".yaml", head + "precision: {bf16: true}\ntraining: {output_dir: " + name +
                                               ", max_steps: 4, per_device_train_batch_size: 4, logging_steps: 1, "
                                               "gradient_checkpointing: " + (name == "mlp" ? "false" : "true") + "}\n");
    CliResult r = run_hftrain("train " + name + ".yaml", dir);
    INFO(name << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, !Catch::Contains("update skipped"));
    const auto logs = train_logs(read_json(dir + "/" + name + "/trainer_state.json"));
    REQUIRE(logs.size() == 4);
    for (const auto& [step, e] : logs) CHECK(std::isfinite(e.at("grad_norm").get<double>()));
    CHECK(std::isfinite(read_json(dir + "/" + name + "/eval_results.json").at("eval_loss").get<double>()));
  }
}

TEST_CASE("bf16 resume: 2N steps equal N + resume N, bitwise, with accumulation and dropout", "[integration][precision]") {
  const std::string dir = scratch_dir("bf16_resume");
  write_text(dir + "/spec.yaml", bf16_spec(8, 4));
  CliResult full = run_hftrain("train spec.yaml --set training.output_dir=full", dir);
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  CliResult half = run_hftrain("train spec.yaml --set training.output_dir=half --set training.max_steps=4", dir);
  REQUIRE(half.exit_code == 0);
  CliResult resumed = run_hftrain(
      "train spec.yaml --set training.output_dir=half --set training.resume_from_checkpoint=half/checkpoint-4", dir);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto a = train_logs(read_json(dir + "/full/trainer_state.json"));
  const auto b = train_logs(read_json(dir + "/half/trainer_state.json"));
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (const auto& [step, entry] : a) {
    INFO("step " << step);
    CHECK(entry.at("loss") == b.at(step).at("loss"));
    CHECK(entry.at("grad_norm") == b.at(step).at("grad_norm"));
  }
  CHECK(file_bytes(dir + "/full/model.safetensors") == file_bytes(dir + "/half/model.safetensors"));
}

TEST_CASE("a forced overflow skips the update and holds the schedule back, resume carries the count",
          "[integration][precision]") {
  const std::string dir = scratch_dir("bf16_overflow");
  write_text(dir + "/spec.yaml", bf16_spec(8, 4));
  CliResult clean = run_with_fault("", "train spec.yaml --set training.output_dir=clean", dir);
  REQUIRE(clean.exit_code == 0);
  CliResult r = run_with_fault("overflow:3", "train spec.yaml --set training.output_dir=skip", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("step 3: gradient overflow (inf/nan), update skipped"));
  const auto c = train_logs(read_json(dir + "/clean/trainer_state.json"));
  const auto s = train_logs(read_json(dir + "/skip/trainer_state.json"));
  // Steps 1-2 are the same run; the skipped step 3 logs the learning rate of step 2 (the schedule did
  // not advance) and every later step the clean run's rate of the step before.
  for (int64_t step : {1, 2}) CHECK(s.at(step).at("loss") == c.at(step).at("loss"));
  CHECK(s.at(3).at("learning_rate") == c.at(2).at("learning_rate"));
  for (int64_t step = 4; step <= 8; ++step) CHECK(s.at(step).at("learning_rate") == c.at(step - 1).at("learning_rate"));
  const json& skipped_norm = s.at(3).at("grad_norm");  // JSON has no inf: written as null
  CHECK((skipped_norm.is_null() || !std::isfinite(skipped_norm.get<double>())));
  CHECK(read_json(dir + "/skip/checkpoint-4/loop_state.json").at("skipped_steps") == 1);
  // Interrupted after step 4 and resumed (no fault in the second process): the same run.
  CliResult first = run_with_fault("overflow:3", "train spec.yaml --set training.output_dir=part --set training.max_steps=4", dir);
  REQUIRE(first.exit_code == 0);
  CliResult second = run_with_fault("", "train spec.yaml --set training.output_dir=part --set training.resume_from_checkpoint=last", dir);
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  const auto p = train_logs(read_json(dir + "/part/trainer_state.json"));
  for (int64_t step = 5; step <= 8; ++step) {
    INFO("step " << step);
    CHECK(p.at(step).at("loss") == s.at(step).at("loss"));
    CHECK(p.at(step).at("learning_rate") == s.at(step).at("learning_rate"));
  }
  CHECK(file_bytes(dir + "/part/model.safetensors") == file_bytes(dir + "/skip/model.safetensors"));
}

TEST_CASE("two ZeRO-2 workers in bf16 resume bitwise and save the gathered fp32 masters", "[integration][precision][dist]") {
  const std::string dir = scratch_dir("bf16_zero2");
  const std::string spec = bf16_spec(6, 3, false, "zero: {stage: 2}\n");
  write_text(dir + "/spec.yaml", spec);
  const std::string common = "train spec.yaml --nproc-per-node 2 --set training.per_device_train_batch_size=3 ";
  CliResult full = run_hftrain(common + "--set training.output_dir=full", dir);
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  CHECK_THAT(full.output, Catch::Contains("fp32 master weights of the partition"));
  REQUIRE(run_hftrain(common + "--set training.output_dir=half --set training.max_steps=3", dir).exit_code == 0);
  CliResult resumed = run_hftrain(common + "--set training.output_dir=half --set training.resume_from_checkpoint=last", dir);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(file_bytes(dir + "/full/model.safetensors") == file_bytes(dir + "/half/model.safetensors"));
  // The saved model is fp32 and equals what zero-to-fp32 rebuilds from the shards' masters.
  CliResult z = run_hftrain("zero-to-fp32 full/checkpoint-6 rebuilt", dir);
  INFO(z.output);
  REQUIRE(z.exit_code == 0);
  auto rebuilt = load(dir + "/rebuilt/model.safetensors"), saved = load(dir + "/full/model.safetensors");
  for (const auto& [name, t] : saved.tensors) {
    INFO(name);
    REQUIRE(rebuilt.tensors.count(name));
    CHECK(torch::equal(rebuilt.tensors.at(name), t));
  }
}

TEST_CASE("checkpoints move between fp32 and bf16 through the fp32 masters", "[integration][precision]") {
  // Resumed at learning rate 0, the run must end with exactly the checkpoint's fp32 weights: bf16 -> fp32
  // continues from the saved masters, fp32 -> bf16 makes the saved fp32 weights its masters (unrounded).
  const std::string dir = scratch_dir("bf16_cross");
  write_text(dir + "/spec.yaml", bf16_spec(4, 4));
  const std::string resume = " --set training.max_steps=6 --set training.learning_rate=0 --set training.resume_from_checkpoint=";
  REQUIRE(run_hftrain("train spec.yaml --set training.output_dir=b", dir).exit_code == 0);
  CliResult to32 = run_hftrain("train spec.yaml --set precision.bf16=false --set training.output_dir=b" + resume + "b/checkpoint-4", dir);
  INFO(to32.output);
  REQUIRE(to32.exit_code == 0);
  CHECK(same_tensors(dir + "/b/model.safetensors", dir + "/b/checkpoint-4/model.safetensors"));

  REQUIRE(run_hftrain("train spec.yaml --set precision.bf16=false --set training.output_dir=f", dir).exit_code == 0);
  CliResult to16 = run_hftrain("train spec.yaml --set training.output_dir=f" + resume + "f/checkpoint-4", dir);
  INFO(to16.output);
  REQUIRE(to16.exit_code == 0);
  CHECK(same_tensors(dir + "/f/model.safetensors", dir + "/f/checkpoint-4/model.safetensors"));
}

TEST_CASE("refused precision settings exit 2 naming the keys, before anything is written", "[integration][precision]") {
  const std::string dir = scratch_dir("bf16_refused");
  write_text(dir + "/spec.yaml", bf16_spec(2));
  struct Case {
    std::string set, expect;
  };
  for (const Case& c : {Case{"--set precision.fp16=true", "precision.fp16 and precision.bf16 are both true"},
                        Case{"--set precision.bf16=false --set precision.fp16=true", "use bf16 instead (precision.bf16: true)"},
                        Case{"--set precision.bf16=false --set zero.reduce_dtype=fp32", "zero.reduce_dtype"},
                        Case{"--set training.fp16_full_eval=true", "training.fp16_full_eval"}}) {
    CliResult r = run_hftrain("train spec.yaml " + c.set, dir);
    INFO(c.set << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.expect));
    CHECK_FALSE(fs::exists(dir + "/out"));
  }
}
