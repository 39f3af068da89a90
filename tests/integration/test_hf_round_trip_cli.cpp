// What an HF user's files go through: config.json keeps every key it was loaded with (unknown ones
// verbatim) and generation_config.json is written as save_pretrained writes it; a hub id or a directory
// without config.json is named as such; a tokenizer whose ids exceed the model's vocabulary, or an
// eos_token_id outside it, is refused before training; floats print as the shortest decimal; a run directory
// evaluates from anywhere (its saved spec names input files absolutely); a missing data file and weights that
// the spec's model does not describe are configuration errors (exit 2) naming the key or tensor.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kRoundTripData = "data: {type: digit_reversal, num_digits: 3, train_size: 32}\n";
const char* const kTraining = "training: {output_dir: out, max_steps: 1, learning_rate: 0.003, save_strategy: \"no\"}\n";

// dir/pretrained: a gpt2 directory trained here, its config.json extended with keys HF configs carry
// that hftrain does not use (special tokens, summary_*, use_cache, one unknown key).
std::string pretrained_gpt2(const std::string& name) {
  const std::string dir = fresh_dir(name);
  write_text(dir + "/make.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}\n") + kRoundTripData +
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
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: pretrained}\n") + kRoundTripData + kTraining);
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
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: gpt2}\n") + kRoundTripData + kTraining);
  CliResult hub = run_hftrain("train spec.yaml", dir);
  CHECK(hub.exit_code == 2);
  CHECK_THAT(hub.output, Catch::Contains("model.from_pretrained: 'gpt2' is not a directory (nothing is downloaded"));
  fs::create_directories(dir + "/empty");
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: empty}\n") + kRoundTripData + kTraining);
  CliResult bare = run_hftrain("train spec.yaml", dir);
  CHECK(bare.exit_code == 2);
  CHECK_THAT(bare.output, Catch::Contains("'empty' has no config.json"));
}

TEST_CASE("token ids beyond the model's vocabulary are refused before training", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_vocab");
  // digit_reversal's tokenizer has 11 ids; a model of 8 embeddings cannot take them.
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 8}\n") +
                                     kRoundTripData + kTraining);
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("model.vocab_size: data 'digit_reversal' gives token ids up to 10") &&
                           Catch::Contains("the model has 8 embeddings"));
  CHECK_FALSE(fs::exists(dir + "/out"));
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}\n") + kRoundTripData + kTraining +
                                     "generation: {eos_token_id: 11}\n");
  // A training run that generates (predict_with_generate) needs the eos id; one that does not only warns
  // (test_hf_models_cli.cpp, "a generation setting outside the vocabulary ...").
  CliResult eos = run_hftrain("train spec.yaml --set training.predict_with_generate=true", dir);
  CHECK(eos.exit_code == 2);
  CHECK_THAT(eos.output, Catch::Contains("generation.eos_token_id: 11 is outside the model's vocabulary (0..10"));
}

TEST_CASE("floats in the dumped spec are the shortest decimals that read back", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_floats");
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n") + kRoundTripData + kTraining);
  CliResult r = run_hftrain("train spec.yaml --dump-config --set training.weight_decay=0.1", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("learning_rate: 0.003") && Catch::Contains("weight_decay: 0.1"));
  CHECK_THAT(r.output, !Catch::Contains("0.0030000000000000001") && !Catch::Contains("0.10000000000000001"));
  CHECK_THAT(r.output, Catch::Contains("adam_epsilon: 1e-08"));
}

TEST_CASE("a run directory evaluates from any directory: its saved spec names the data files absolutely",
          "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_paths");
  fs::create_directories(dir + "/data");
  std::string rows, eval_rows;
  for (int i = 0; i < 24; ++i) {
    const std::string row = "{\"text\": \"the king shall speak of this night " + std::to_string(i) + "\"}\n";
    rows += row;
    if (i < 8) eval_rows += row;
  }
  write_text(dir + "/data/train.jsonl", rows);
  write_text(dir + "/data/eval.jsonl", eval_rows);
  write_text(dir + "/spec.yaml", "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                                 "data: {type: jsonl, train_file: data/train.jsonl, validation_file: data/eval.jsonl, "
                                 "tokenizer: bytes, max_length: 48}\n" + std::string(kTraining));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string saved = read_text(dir + "/out/run_spec.yaml");
  const std::string absolute_train = (fs::path(dir) / "data/train.jsonl").lexically_normal().string();
  CHECK_THAT(saved, Catch::Contains("train_file: " + absolute_train));
  CHECK_THAT(saved, Catch::Contains("tokenizer: bytes"));  // a name, not a file: as written
  // --dump-config shows the spec as the user wrote it.
  CHECK_THAT(run_hftrain("train spec.yaml --dump-config", dir).output, Catch::Contains("train_file: data/train.jsonl"));
  // From another directory, by the run directory's absolute path.
  const std::string elsewhere = fresh_dir("round_trip_paths_elsewhere");
  CliResult e = run_hftrain("eval '" + dir + "/out'", elsewhere);
  INFO(e.output);
  CHECK(e.exit_code == 0);
  CHECK(fs::exists(dir + "/out/eval_results.json"));
}

TEST_CASE("a missing data file is named at its key and file:line before anything is written", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_missing_data");
  const std::string spec = "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                           "data: {type: jsonl, train_file: data/nope.jsonl, tokenizer: bytes, max_length: 48}\n" +
                           std::string(kTraining);
  write_text(dir + "/spec.yaml", spec);
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("spec.yaml:2:") && Catch::Contains("data.train_file: 'data/nope.jsonl' does not exist"));
  CHECK_FALSE(fs::exists(dir + "/out"));
}

TEST_CASE("weights that model.type's options do not describe exit 2 naming the tensor", "[integration][hf_round_trip]") {
  const std::string dir = pretrained_gpt2("round_trip_bare_shapes");
  fs::create_directories(dir + "/bare");
  fs::copy_file(dir + "/pretrained/model.safetensors", dir + "/bare/model.safetensors");  // no config.json
  write_text(dir + "/spec.yaml", std::string("model: {from_pretrained: bare, type: gpt2, n_layer: 1, n_head: 2, n_embd: 32}\n") +
                                     kRoundTripData + kTraining);
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("has shape") && Catch::Contains("do model.type and its options describe these weights?"));
  CHECK_FALSE(fs::exists(dir + "/out"));
}

TEST_CASE("every section is checked before training, and the v4.x docs' ds_config zeros load through the binary",
          "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_checked_first");
  write_text(dir + "/spec.yaml", std::string("model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n") + kRoundTripData + kTraining +
                                     "generation: {max_new_tokens: -2}\n");
  CliResult bad = run_hftrain("train spec.yaml", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("generation.max_new_tokens") && Catch::Contains("must be >= 1, got -2"));
  CHECK_FALSE(fs::exists(dir + "/out"));
  // The legacy ds_config: 0 where HF fills a value from the model's hidden size, at ZeRO-3 and stage 2's bucket.
  write_text(dir + "/ds.json", R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": 0,
    "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0,
    "offload_optimizer": {"device": "cpu"}}})");
  write_text(dir + "/ds.yaml", std::string("model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n") + kRoundTripData +
                                   "training: {output_dir: out, max_steps: 2, save_strategy: \"no\", deepspeed: ds.json}\n");
  CliResult dump = run_hftrain("train ds.yaml --dump-config", dir);
  INFO(dump.output);
  REQUIRE(dump.exit_code == 0);
  CHECK_THAT(dump.output, Catch::Contains("stage3_prefetch_bucket_size: 230") &&
                              Catch::Contains("stage3_param_persistence_threshold: 160"));
  // A value the DeepSpeed file placed is attributed to it, not to the spec file.
  CHECK_THAT(dump.output, Catch::Contains("# device from training.deepspeed zero_optimization.offload_optimizer.device: cpu (ds.json:"));
  CliResult run = run_hftrain("train ds.yaml", dir);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("0 is the v4.x docs' spelling of \"auto\""));
}

TEST_CASE("every family's saved config.json keeps the keys it was loaded with", "[integration][hf_round_trip]") {
  const std::string dir = fresh_dir("round_trip_families");
  std::string csv = "sentence,label\n";
  for (int i = 0; i < 16; ++i) csv += std::string(i % 2 ? "good fine " : "bad poor ") + std::to_string(i) + "," + (i % 2 ? "pos" : "neg") + "\n";
  write_text(dir + "/train.csv", csv);
  const std::string lm = "data: {type: digit_reversal, num_digits: 3, train_size: 32, eval_size: 8, test_size: 2}\n";
  const std::string seq2seq = "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 32, eval_size: 8, test_size: 2}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"llama", "model: {type: llama, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2}\n" + lm},
      {"bert", "model: {type: bert, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2}\n"
               "data: {type: csv, train_file: train.csv, validation_split_percentage: 25, task: sequence_classification, "
               "text_column: sentence, max_length: 16}\n"},
      {"t5", "model: {type: t5, d_model: 16, d_kv: 8, d_ff: 32, num_layers: 1, num_heads: 2}\n" + seq2seq},
      {"bart", "model: {type: bart, d_model: 16, encoder_layers: 1, decoder_layers: 1, encoder_attention_heads: 2, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 32, decoder_ffn_dim: 32, max_position_embeddings: 32, "
               "pad_token_id: 0, eos_token_id: 1, bos_token_id: 1, decoder_start_token_id: 1}\n" + seq2seq}};
  for (const auto& [family, head] : cases) {
    INFO(family);
    // A model of the family trained here, its config.json extended with keys HF configs carry that hftrain
    // does not read, then loaded, trained and saved again.
    write_text(dir + "/" + family + "_make.yaml", head + "training: {output_dir: " + family + "_made, max_steps: 1, save_strategy: \"no\"}\n");
    CliResult made = run_hftrain("train " + family + "_make.yaml", dir);
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    const std::string pretrained = dir + "/" + family + "_pretrained";
    fs::create_directories(pretrained);
    fs::copy_file(dir + "/" + family + "_made/model.safetensors", pretrained + "/model.safetensors");
    json config = json::parse(read_text(dir + "/" + family + "_made/config.json"));
    config["transformers_version"] = "4.46.0";
    config["use_cache"] = true;
    config["task_specific_params"] = {{"summarization", {{"num_beams", 4}}}};
    config["my_own_key"] = {{"nested", 1}};
    write_text(pretrained + "/config.json", config.dump(2));
    std::string data = head.substr(head.find("data:"));
    write_text(dir + "/" + family + ".yaml", "model: {from_pretrained: " + family + "_pretrained}\n" + data +
                                                 "training: {output_dir: " + family + "_out, max_steps: 1, save_strategy: \"no\"}\n");
    CliResult r = run_hftrain("train " + family + ".yaml", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const json saved = json::parse(read_text(dir + "/" + family + "_out/config.json"));
    for (const auto& [key, value] : config.items()) {
      INFO(key);
      REQUIRE(saved.contains(key));
      CHECK(saved[key] == value);
    }
  }
}
