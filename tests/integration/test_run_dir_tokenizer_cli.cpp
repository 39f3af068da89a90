// A run directory is a complete model directory, as HF Trainer makes it by saving its processing_class:
// the data's HF tokenizer files are copied beside the final model and into every checkpoint (listed in the
// manifest), byte for byte; a tokenizer file of another name is saved as tokenizer.json; the run directory
// then serves as the tokenizer of a later run.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string spec_with_tokenizer(const std::string& tokenizer, const std::string& output_dir) {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16, dropout: 0.0}\n"
         "data: {type: text_file, path: input.txt, tokenizer: " + tokenizer + ", block_size: 16}\n"
         "training: {output_dir: " + output_dir + ", per_device_train_batch_size: 4, max_steps: 4, save_strategy: steps, "
         "save_steps: 4, logging_steps: 1, eval_strategy: \"no\", report_to: none, seed: 3}\n";
}

}  // namespace

TEST_CASE("train saves the data's tokenizer files beside the model and in each checkpoint", "[integration][tokenizers]") {
  const std::string dir = fresh_dir("run_dir_tokenizer");
  const std::string fixture = read_text(std::string(HFTRAIN_SOURCE_DIR) + "/tests/data/hf_tokenizers/llama2_legacy_bpe.json");
  REQUIRE_FALSE(fixture.empty());
  fs::create_directories(dir + "/tok");
  const std::map<std::string, std::string> files = {
      {"tokenizer.json", fixture},
      {"tokenizer_config.json", "{\"tokenizer_class\": \"LlamaTokenizerFast\", \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}\n"},
      {"special_tokens_map.json", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\"}\n"}};
  for (const auto& [name, bytes] : files) write_text(dir + "/tok/" + name, bytes);
  write_text(dir + "/tok/notes.txt", "not a tokenizer file\n");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat and the dog ran far away\n";
  write_text(dir + "/input.txt", text);
  write_text(dir + "/spec.yaml", spec_with_tokenizer("tok", "out"));
  const CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const std::string& where : {"out", "out/checkpoint-4"})
    for (const auto& [name, bytes] : files) {
      INFO(where << "/" << name);
      CHECK(read_bytes(dir + "/" + where + "/" + name) == bytes);
    }
  CHECK_FALSE(fs::exists(dir + "/out/notes.txt"));
  const auto manifest = json::parse(read_text(dir + "/out/checkpoint-4/manifest.json"));
  int listed = 0;
  for (const auto& f : manifest.at("files")) listed += files.count(f.at("name").get<std::string>()) ? 1 : 0;
  CHECK(listed == 3);
  const CliResult inspect = run_hftrain("checkpoint inspect out/checkpoint-4", dir);
  INFO(inspect.output);
  CHECK(inspect.exit_code == 0);

  // The run directory is a tokenizer directory: a second run reading its tokenizer from it sees the same ids,
  // so it trains to the same losses.
  write_text(dir + "/again.yaml", spec_with_tokenizer("out", "again"));
  const CliResult again = run_hftrain("train again.yaml", dir);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  const std::vector<double> losses = logged_losses(dir + "/out/trainer_state.json");
  REQUIRE(losses.size() == 4);
  CHECK(logged_losses(dir + "/again/trainer_state.json") == losses);

  // A tokenizer file of another name is saved under the name HF reads.
  fs::create_directories(dir + "/named");
  write_text(dir + "/named/my_tokenizer.json", fixture);
  write_text(dir + "/named.yaml", spec_with_tokenizer("named/my_tokenizer.json", "named_out"));
  const CliResult named = run_hftrain("train named.yaml", dir);
  INFO(named.output);
  REQUIRE(named.exit_code == 0);
  CHECK(read_bytes(dir + "/named_out/tokenizer.json") == fixture);
  CHECK_FALSE(fs::exists(dir + "/named_out/my_tokenizer.json"));
  fs::remove_all(dir);
}
