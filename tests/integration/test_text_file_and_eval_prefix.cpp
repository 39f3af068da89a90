// text_file with the character-level tokenizer end to end (the shakespeare_char example's path), the
// data-wait metric, and `hftrain eval --metric-key-prefix`.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

using namespace hftrain_test;
using json = nlohmann::json;

TEST_CASE("text_file tokenizer chars: vocabulary from the file, trains, evaluates under a chosen prefix",
          "[integration]") {
  const std::string dir = fresh_dir("text_chars");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be\n";  // distinct: '\n' ' ' b e n o r t = 8
  write_text(dir + "/corpus.txt", text);
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: text_file, path: corpus.txt, tokenizer: chars, block_size: 16}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: 6, logging_steps: 3, save_strategy: "no",
           report_to: none, disable_tqdm: true}
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["vocab_size"] == 8);
  const json train = json::parse(read_text(dir + "/out/train_results.json"));
  REQUIRE(train.contains("train_data_wait_fraction"));
  CHECK(train["train_data_wait_fraction"].get<double>() >= 0.0);
  CHECK(train["train_data_wait_fraction"].get<double>() < 0.5);

  CliResult e = run_hftrain("eval out --metric-key-prefix heldout", dir);
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  const json metrics = json::parse(read_text(dir + "/out/heldout_results.json"));
  CHECK(metrics.contains("heldout_loss"));
  CHECK_FALSE(metrics.contains("eval_loss"));
  CHECK(run_hftrain("eval out --metric-key-prefix 'a/b'", dir).exit_code == 2);

  write_text(dir + "/bad.txt", "ab\xC3(cd");
  CliResult bad = run_hftrain("train spec.yaml --set data.path=bad.txt --set training.output_dir=out2", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("data.path 'bad.txt': invalid UTF-8 at byte offset 2"));
}
