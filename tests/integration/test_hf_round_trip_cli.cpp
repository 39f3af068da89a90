// What an HF user's files go through: config.json keeps every key it was loaded with (unknown ones
// verbatim) and generation_config.json is written as save_pretrained writes it; a hub id or a directory
// without config.json is named as such; a tokenizer whose ids exceed the model's vocabulary, or an
// eos_token_id outside it, is refused before training; floats print as the shortest decimal.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kData = "data: {type: digit_reversal, num_digits: 3, train_size: 32}\n";
const char* const kTraining = "training: {output_dir: out, max_steps: 1, learning_rate: 0.003, save_strategy: \"no\"}\n";

// dir/pretrained: a gpt2 directory trained here, its config.json extended with keys HF configs carry
// that hftrain does not use (special tokens, summary_*, use_cache, one unknown key).
std::string pretrained_gpt2(const std::string& name) {
  const std::string dir = fresh_dir(name);
  write_text(dir + "/make.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}\n") + kData +
                                     "training: {output_dir: made, max_steps: 1, save_strategy: \"no\"}\n");
  CliResult r = run_hftrain("train make.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  fs::create_directories(dir + "/pretrained");
  fs::copy_file(dir + "/made/model.safetensors", dir + "/pretrained/model.safetensors");
  json config = json::parse(read_text(dir + "/made/config.json"));
  config["bos_token_id"] = 10;
  config["eos_token_id"] = 10;
  config["use_cache"] = true;
  config["summary_type"] = "cls_index";
  config["summary_first_dropout"] = 0.1;
  config["task_specific_params"] = {{"text-generation", {{"do_sample", true}, {"max_length", 50}}}};
  config["my_own_key"] = {1, 2, 3};
  write_text(dir + "/pretrained/config.json", config.dump(2));
  return dir;
}

}  // namespace

TEST_CASE("saved config.json keeps every loaded key and generation_config.json is written", "[integration][hf_round_trip]") {
  const std::string dir = pretrained_gpt2("round_trip_config");
  const json loaded = json::parse(read_text(dir + "/pretrained/config.json"));
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: pretrained}\n") + kData + kTraining);
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json saved = json::parse(read_text(dir + "/out/config.json"));
  for (const auto& [key, value] : loaded.items()) {
    INFO(key);
    REQUIRE(saved.contains(key));
    CHECK(saved[key] == value);
  }
  // HF GenerationConfig.from_model_config: the special token ids the config sets.
  const json generation = json::parse(read_text(dir + "/out/generation_config.json"));
  CHECK(generation["bos_token_id"] == 10);
  CHECK(generation["eos_token_id"] == 10);
  CHECK(generation["_from_model_config"] == true);

  // A generation_config.json beside the loaded config.json is kept as it was.
  const json own = {{"eos_token_id", 10}, {"max_new_tokens", 7}, {"do_sample", false}};
  write_text(dir + "/pretrained/generation_config.json", own.dump());
  CliResult again = run_hftrain("train spec.yaml --set training.output_dir=out2", dir);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(json::parse(read_text(dir + "/out2/generation_config.json")) == own);
}

TEST_CASE("from_pretrained names a hub id or a directory without config.json as such", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_hub_id");
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: gpt2}\n") + kData + kTraining);
  CliResult hub = run_hftrain("train spec.yaml", dir);
  CHECK(hub.exit_code == 2);
  CHECK_THAT(hub.output, Catch::Contains("model.from_pretrained: 'gpt2' is not a directory (nothing is downloaded"));
  fs::create_directories(dir + "/empty");
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: empty}\n") + kData + kTraining);
  CliResult bare = run_hftrain("train spec.yaml", dir);
  CHECK(bare.exit_code == 2);
  CHECK_THAT(bare.output, Catch::Contains("'empty' has no config.json"));
}

TEST_CASE("token ids beyond the model's vocabulary are refused before training", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_vocab");
  // digit_reversal's tokenizer has 11 ids; a model of 8 embeddings cannot take them.
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 8}\n") +
                                     kData + kTraining);
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("model.vocab_size: data 'digit_reversal' gives token ids up to 10") &&
                           Catch::Contains("the model has 8 embeddings"));
  CHECK_FALSE(fs::exists(dir + "/out"));
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}\n") + kData + kTraining +
                                     "generation: {eos_token_id: 11}\n");
  CliResult eos = run_hftrain("train spec.yaml", dir);
  CHECK(eos.exit_code == 2);
  CHECK_THAT(eos.output, Catch::Contains("generation.eos_token_id: 11 is outside the model's vocabulary (0..10"));
}

TEST_CASE("floats in the dumped spec are the shortest decimals that read back", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_floats");
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n") + kData + kTraining);
  CliResult r = run_hftrain("train spec.yaml --dump-config --set training.weight_decay=0.1", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("learning_rate: 0.003") && Catch::Contains("weight_decay: 0.1"));
  CHECK_THAT(r.output, !Catch::Contains("0.0030000000000000001") && !Catch::Contains("0.10000000000000001"));
  CHECK_THAT(r.output, Catch::Contains("adam_epsilon: 1e-08"));
}
