// File datasets through the real binary: a tiny gpt trained on a packed jsonl corpus (with evaluation and
// the tokenized-dataset cache), length-grouped batches, nanoGPT token files, a malformed row that must
// exit 2 naming file:line, and a JSON array file training exactly as the same rows in JSON Lines.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "fixture_text.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string corpus(int rows, int offset) {
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"};
  std::string text;
  for (int r = 0; r < rows; ++r) {
    std::string line;
    for (int w = 0; w < 4 + (r + offset) % 5; ++w) line += std::string(w ? " " : "") + words[(r * 3 + w + offset) % 10];
    text += "{\"text\": \"" + line + ".\", \"id\": " + std::to_string(r) + "}\n";
  }
  return text;
}

int count_files(const std::string& dir) {
  if (!fs::exists(dir)) return 0;
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("gpt trains on a packed jsonl corpus through the CLI and the dataset cache is reused", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_jsonl");
  write_text(dir + "/train.jsonl", corpus(120, 0));
  write_text(dir + "/val.jsonl", corpus(20, 7));
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: train.jsonl, validation_file: val.jsonl, block_size: 32, cache_dir: cache}
training:
  output_dir: out
  per_device_train_batch_size: 8
  max_steps: 8
  learning_rate: 0.003
  logging_steps: 4
  eval_strategy: steps
  eval_steps: 8
  save_strategy: "no"
  report_to: none
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json state = json::parse(read_text(dir + "/out/trainer_state.json"));
  CHECK(state["global_step"] == 8);
  bool evaluated = false;
  for (const auto& e : state["log_history"])
    if (e.contains("eval_loss")) {
      evaluated = true;
      CHECK(e.contains("eval_perplexity"));
      CHECK(e["eval_loss"].get<double>() < 5.4);  // below ln(256) = 5.55: the byte model has learnt something
    }
  CHECK(evaluated);
  json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["vocab_size"] == 256);  // taken from the byte tokenizer
  CHECK(config["n_positions"] == 32);  // block_size of the packed data
  CHECK(count_files(dir + "/cache") == 1);

  // Same data again: the cache file is reused (no second file), a changed corpus adds one.
  CliResult again = run_hftrain("train spec.yaml --set training.output_dir=out2", dir);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(count_files(dir + "/cache") == 1);
  write_text(dir + "/train.jsonl", corpus(121, 0));
  REQUIRE(run_hftrain("train spec.yaml --set training.output_dir=out3", dir).exit_code == 0);
  CHECK(count_files(dir + "/cache") == 2);
}

TEST_CASE("group_by_length trains on unpacked rows and token_files trains on nanoGPT bins", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_grouped");
  write_text(dir + "/train.jsonl", corpus(64, 0));
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: train.jsonl, cache_dir: cache}
training: {output_dir: out, per_device_train_batch_size: 4, max_steps: 4, group_by_length: true, save_strategy: "no", report_to: none}
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  CHECK(r.exit_code == 0);

  {
    std::ofstream bin(dir + "/train.bin", std::ios::binary);
    for (int i = 0; i < 2000; ++i) {
      const unsigned char le[2] = {static_cast<unsigned char>((i * 7) % 97), 0};
      bin.write(reinterpret_cast<const char*>(le), 2);
    }
  }
  write_text(dir + "/bins.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: token_files, train_file: train.bin, vocab_size: 97, block_size: 16, sampling: random}
training: {output_dir: bins_out, per_device_train_batch_size: 4, max_steps: 4, save_strategy: "no", report_to: none}
)");
  CliResult b = run_hftrain("train bins.yaml", dir);
  INFO(b.output);
  CHECK(b.exit_code == 0);
  CHECK(fs::exists(dir + "/bins_out/model.safetensors"));
}

TEST_CASE("a malformed jsonl row exits 2 naming file and line, and skip trains on the rest", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_bad_row");
  write_text(dir + "/train.jsonl", corpus(10, 0) + "{\"text\": \"broken\"\n" + corpus(10, 3));
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: train.jsonl, block_size: 16, cache_dir: cache}
training: {output_dir: out, per_device_train_batch_size: 4, max_steps: 2, save_strategy: "no", report_to: none}
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("train.jsonl:11") && Catch::Contains("malformed JSON"));
  CHECK_FALSE(fs::exists(dir + "/out"));
  CliResult s = run_hftrain("train spec.yaml --set data.on_bad_row=skip", dir);
  INFO(s.output);
  CHECK(s.exit_code == 0);
  CHECK_THAT(s.output, Catch::Contains("skipped 1 bad rows"));
}

TEST_CASE("bert classifies csv rows with labels discovered from the training file", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_bert");
  write_text(dir + "/train.csv", sentiment_csv(64, 0));
  write_text(dir + "/val.csv", sentiment_csv(16, 1));
  write_text(dir + "/spec.yaml", R"(model: {type: bert, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}
data: {type: csv, train_file: train.csv, validation_file: val.csv, task: sequence_classification, text_column: sentence, max_length: 32, cache_dir: cache}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: 48, learning_rate: 0.003, eval_strategy: steps, eval_steps: 48, save_strategy: "no", report_to: none, group_by_length: true}
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json results = json::parse(read_text(dir + "/out/all_results.json"));
  CHECK(results["eval_accuracy"].get<double>() >= 0.8);  // two labels: chance is about 0.5
  json config = json::parse(read_text(dir + "/out/config.json"));
  // num_labels and the class names from the data's label set, sorted as run_glue does
  CHECK(config["id2label"] == json({{"0", "neg"}, {"1", "pos"}}));
  CHECK(config["label2id"] == json({{"neg", 0}, {"pos", 1}}));

  CliResult p = run_hftrain("predict out", dir);  // the test split defaults to the validation file
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  std::ifstream lines(dir + "/out/predictions.jsonl");
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    json j = json::parse(line);
    CHECK(j["label_name"] == config["id2label"][std::to_string(j["label"].get<int64_t>())]);
  }
  CHECK(n == 16);
}

TEST_CASE("bert_mlm trains on a text file with masked_lm and an HF WordPiece tokenizer.json", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_mlm");
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"};
  std::string vocab = R"("[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, ".": 5)";
  for (int i = 0; i < 10; ++i) vocab += ", \"" + std::string(words[i]) + "\": " + std::to_string(6 + i);
  std::string added;
  const char* specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 5; ++i)
    added += std::string(i ? ", " : "") + "{\"id\": " + std::to_string(i) + ", \"content\": \"" + specials[i] +
             "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}";
  fs::create_directories(dir + "/tok");
  write_text(dir + "/tok/tokenizer.json", R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [)" + added + R"(],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
             {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
            "vocab": {)" + vocab + "}}}");
  std::string text;
  for (int r = 0; r < 80; ++r) {
    for (int w = 0; w < 4 + r % 5; ++w) text += std::string(w ? " " : "") + words[(r * 3 + w) % 10];
    text += ".\n";
  }
  write_text(dir + "/train.txt", text);
  write_text(dir + "/spec.yaml", R"(model: {type: bert_mlm, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}
data: {type: text, train_file: train.txt, task: masked_lm, tokenizer: tok/tokenizer.json, validation_split_percentage: 10, cache_dir: cache}
training: {output_dir: out, per_device_train_batch_size: 8, max_steps: 8, learning_rate: 0.003, eval_strategy: steps, eval_steps: 8, save_strategy: "no", report_to: none}
)");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json results = json::parse(read_text(dir + "/out/all_results.json"));
  REQUIRE(results.contains("eval_loss"));
  CHECK(results["eval_loss"].get<double>() > 0.5);  // masked positions exist and are scored
  CHECK(results["eval_loss"].get<double>() < 3.5);   // ln(16) = 2.77 at chance; not diverged
  json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["vocab_size"] == 16);  // from the tokenizer.json
}

TEST_CASE("two ranks share the dataset cache: rank 0 tokenizes, rank 1 waits for its file", "[integration][datasets][dist]") {
  const std::string dir = fresh_dir("datasets_two_ranks");
  write_text(dir + "/train.jsonl", corpus(80, 0));
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: train.jsonl, block_size: 16, cache_dir: cache, cache_wait_seconds: 3}
training: {output_dir: out, per_device_train_batch_size: 4, max_steps: 3, save_strategy: "no", report_to: none}
)");
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(json::parse(read_text(dir + "/out/trainer_state.json"))["global_step"] == 3);
  CHECK(count_files(dir + "/cache") == 1);  // written once, by rank 0

  // rank 0 cannot write the cache (its directory would have to be created under a regular file): it
  // trains on its in-memory copy with a warning, and rank 1 gives up after cache_wait_seconds, naming
  // itself and the file; the job fails.
  write_text(dir + "/blocker", "not a directory\n");
  CliResult f = run_hftrain("train spec.yaml --nproc-per-node 2 --set data.cache_dir=blocker/cache --set training.output_dir=out2", dir);
  INFO(f.output);
  CHECK(f.exit_code != 0);
  CHECK_THAT(f.output, Catch::Contains("could not write the dataset cache") &&
                           Catch::Contains("rank 1 waited 3 s for rank 0 to write the tokenized dataset") &&
                           Catch::Contains("blocker/cache"));
}

TEST_CASE("a JSON array .json file trains as the same rows in JSON Lines do", "[integration][datasets]") {
  const std::string dir = fresh_dir("datasets_json_array");
  const std::string lines = corpus(40, 0);
  write_text(dir + "/train.jsonl", lines);
  std::string array = "[\n";
  for (std::size_t pos = 0, end; (end = lines.find('\n', pos)) != std::string::npos; pos = end + 1)
    array += (pos ? ",\n  " : "  ") + lines.substr(pos, end - pos);
  write_text(dir + "/train.json", array + "\n]\n");
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: train.jsonl, block_size: 16, cache_dir: cache}
training: {output_dir: lines, per_device_train_batch_size: 4, max_steps: 4, logging_steps: 1, save_strategy: "no", report_to: none}
)");
  CliResult a = run_hftrain("train spec.yaml", dir);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CliResult b = run_hftrain("train spec.yaml --set data.train_file=train.json --set training.output_dir=array", dir);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  auto losses = [&](const std::string& out) {
    std::vector<double> v;
    const json state = json::parse(read_text(dir + "/" + out + "/trainer_state.json"));
    for (const auto& e : state["log_history"])
      if (e.contains("loss")) v.push_back(e["loss"].get<double>());
    return v;
  };
  CHECK(losses("array").size() == 4);
  CHECK(losses("array") == losses("lines"));
  CHECK(read_text(dir + "/array/model.safetensors") == read_text(dir + "/lines/model.safetensors"));

  // An element without the text column: exit 2 naming the file, its line and the element.
  write_text(dir + "/bad.json", "[\n  {\"text\": \"ok\"},\n  {\"body\": \"no text\"}\n]\n");
  CliResult bad = run_hftrain("train spec.yaml --set data.train_file=bad.json --set training.output_dir=bad", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("bad.json:3 (element 1): column 'text': missing column"));
}
