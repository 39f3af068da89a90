// Chat fine-tuning through the binary (TRL SFTTrainer's data side): a tiny llama trained from `messages`
// jsonl and from the same rows in parquet (written by parquet-wasm) with assistant-only loss; with bfd
// packing (asked for by TRL's SFTConfig names under training:) its step-1 loss equals the unpacked run's,
// and its eval loss falls; predict --prompts renders a conversation with the generation prompt;
// `hftrain data inspect --json` prints what tests/reference/sft_reference.py makes
// of the same rows; the saved model directory carries the spec's chat template and TRL's eos_token, and
// generation from it stops at that token.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kTemplate =
    "{% for message in messages %}\n"
    "{% if message.role == 'assistant' %}\n"
    "<|a|>{% generation %}{{ message.content }}<|e|>{% endgeneration %}\n"
    "{% else %}\n"
    "<|{{ message.role[0] }}|>{{ message.content }}<|e|>\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}<|a|>{% endif %}\n";

// Conversations of one to three turns whose lengths vary (sums written out: learnable).
std::string conversations(int n, int offset) {
  std::string out;
  for (int i = offset; i < offset + n; ++i) {
    json messages = json::array();
    if (i % 4 == 0) messages.push_back({{"role", "system"}, {"content", "Answer with the sum."}});
    for (int t = 0; t < 1 + i % 3; ++t) {
      const int a = (i * 7 + t * 3) % 50, b = (i * 13 + t) % 40;
      messages.push_back({{"role", "user"}, {"content", std::to_string(a) + " plus " + std::to_string(b) + "?"}});
      messages.push_back({{"role", "assistant"}, {"content", "It is " + std::to_string(a + b) + "."}});
    }
    out += json{{"messages", messages}}.dump() + "\n";
  }
  return out;
}

double train_loss(const std::string& run_dir) {
  return json::parse(read_text(run_dir + "/train_results.json")).at("train_loss").get<double>();
}

std::vector<double> eval_losses(const std::string& run_dir) {
  std::vector<double> out;
  const json state = json::parse(read_text(run_dir + "/trainer_state.json"));
  for (const auto& e : state.at("log_history"))
    if (e.contains("eval_loss")) out.push_back(e["eval_loss"].get<double>());
  return out;
}

CliResult train(const std::string& dir, const std::string& args) {
  CliResult r = run_hftrain("train spec.yaml " + args, dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r;
}

// chat.jsonl and eval.jsonl as parquet (messages: list<struct<role, content>>, snappy), by parquet-wasm and apache-arrow;
// false where node or the packages are missing.
bool write_parquet(const std::string& dir) {
  const char* env = std::getenv("HFTRAIN_NPM_DIR");
  const std::string modules = std::string(env && *env ? env : "/opt/hftrain-npm") + "/node_modules";
  if (run_shell("command -v node >/dev/null 2>&1").exit_code != 0 || !fs::exists(modules + "/parquet-wasm")) return false;
  write_text(dir + "/to_parquet.js",
             "const fs = require('fs'); const arrow = require('apache-arrow'); const pq = require('parquet-wasm');\n"
             "const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\\n').map((l) => JSON.parse(l));\n"
             "const msg = new arrow.Struct([new arrow.Field('role', new arrow.Utf8(), true), "
             "new arrow.Field('content', new arrow.Utf8(), true)]);\n"
             "const t = new arrow.Table({messages: arrow.vectorFromArray(rows.map((r) => r.messages), "
             "new arrow.List(new arrow.Field('item', msg, true)))});\n"
             "const props = new pq.WriterPropertiesBuilder().setCompression(pq.Compression.SNAPPY).setMaxRowGroupSize(7).build();\n"
             "fs.writeFileSync(process.argv[3], pq.writeParquet(pq.Table.fromIPCStream(arrow.tableToIPC(t, 'stream')), props));\n");
  const CliResult r = run_shell("cd '" + dir + "' && NODE_PATH='" + modules + "' node to_parquet.js chat.jsonl chat.parquet 2>&1 && "
                                "NODE_PATH='" + modules + "' node to_parquet.js eval.jsonl eval.parquet 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return true;
}

// A byte-level BPE tokenizer.json without merges: byte b is token b (its symbol from GPT-2's byte-to-unicode
// table), then the special tokens <|im_start|> 256, <|im_end|> 257 and </s> 258.
std::string byte_level_tokenizer() {
  json vocab = json::object();
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    const int cp = printable ? b : 256 + shifted++;
    std::string symbol;  // cp < 0x800: one or two UTF-8 bytes
    if (cp < 0x80) symbol = std::string(1, static_cast<char>(cp));
    else symbol = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    vocab[symbol] = b;
  }
  json added = json::array();
  int id = 256;
  for (const char* t : {"<|im_start|>", "<|im_end|>", "</s>"})
    added.push_back({{"id", id++}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  const json level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  return json{{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
              {"normalizer", nullptr}, {"pre_tokenizer", level}, {"post_processor", nullptr}, {"decoder", level},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                         {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                         {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab},
                         {"merges", json::array()}}}}
      .dump();
}

json predictions(const std::string& path) { return json::parse(read_text(path)); }

}  // namespace

TEST_CASE("a chat SFT run packed best-fit-decreasing has the unpacked run's loss, from jsonl and parquet",
          "[integration][sft]") {
  const std::string dir = fresh_dir("sft_chat_packed");
  write_text(dir + "/chat.jsonl", conversations(24, 0));
  write_text(dir + "/eval.jsonl", conversations(6, 100));
  write_text(dir + "/chat.jinja", kTemplate);
  write_text(dir + "/spec.yaml",
             "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
             "num_key_value_heads: 2, max_position_embeddings: 256}\n"
             "data: {type: jsonl, train_file: chat.jsonl, validation_file: eval.jsonl, tokenizer: bytes, "
             "chat_template: chat.jinja, assistant_only_loss: true, cache_dir: cache}\n"
             "training: {output_dir: out, max_steps: 1, per_device_train_batch_size: 32, learning_rate: 0.01, "
             "logging_steps: 1, save_strategy: \"no\", do_eval: false, seed: 3, max_length: 128}\n");
  // Step 1 sees every example in both runs: the same label tokens, so the same mean loss.
  const CliResult unpacked = train(dir, "--set training.output_dir=unpacked");
  CHECK_THAT(unpacked.output, Catch::Contains("dataset format: conversational (column 'messages')"));
  const CliResult packed = train(dir, "--set training.output_dir=packed --set training.packing=true");
  CHECK_THAT(packed.output, Catch::Contains("packed 24 examples into") && Catch::Contains("(bfd)"));
  const double loss = train_loss(dir + "/unpacked");
  CHECK(std::abs(train_loss(dir + "/packed") - loss) <= 1e-5);
  if (write_parquet(dir)) {
    train(dir, "--set training.output_dir=parquet --set training.packing=true --set data.type=parquet "
               "--set data.train_file=chat.parquet --set data.validation_file=eval.parquet");
    CHECK(std::abs(train_loss(dir + "/parquet") - loss) <= 1e-5);
  } else {
    WARN("node or parquet-wasm is missing: the parquet run is skipped");
  }
  // Trained on, packed, the assistant's answers: the eval loss falls.
  train(dir, "--set training.output_dir=longer --set training.packing=true --set training.max_steps=24 "
             "--set training.per_device_train_batch_size=2 --set training.eval_strategy=steps --set training.eval_steps=8");
  const std::vector<double> evals = eval_losses(dir + "/longer");
  REQUIRE(evals.size() >= 3);
  CHECK(evals.back() < evals.front());
  // predict --prompts of a conversation renders it with the template's generation prompt.
  write_text(dir + "/ask.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"3 plus 4?\"}]}\n");
  const CliResult asked = run_hftrain("predict longer --prompts ask.jsonl --set training.output_dir=asked "
                                      "--set generation.max_new_tokens=4", dir);
  INFO(asked.output);
  REQUIRE(asked.exit_code == 0);
  const json line = json::parse(read_text(dir + "/asked/predictions.jsonl"));
  CHECK(line["prompt"] == "<|u|>3 plus 4?<|e|>\n<|a|>");
}

TEST_CASE("data inspect --json prints the ids and labels of TRL's reference, packed rows with their boundaries",
          "[integration][sft]") {
  const std::string dir = fresh_dir("sft_data_inspect");
  write_text(dir + "/chat.jsonl", conversations(5, 0));
  write_text(dir + "/chat.jinja", kTemplate);
  write_text(dir + "/spec.yaml",
             "model: {type: llama, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2}\n"
             "data: {type: jsonl, train_file: chat.jsonl, tokenizer: bytes, chat_template: chat.jinja, "
             "assistant_only_loss: true, packing: true, max_length: 200, cache_dir: cache}\n"
             "training: {output_dir: out}\n");
  const CliResult r = run_shell("cd '" + dir + "' && '" + std::string(HFTRAIN_BINARY) +
                                "' data inspect spec.yaml --json --n 10 2>/dev/null");
  REQUIRE(r.exit_code == 0);
  std::vector<json> rows;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  REQUIRE(!rows.empty());
  for (const auto& row : rows) {
    CHECK(row["boundaries"].back().get<size_t>() == row["input_ids"].size());
    CHECK(row["labels"].size() == row["input_ids"].size());
  }
  const CliResult human = run_hftrain("data inspect spec.yaml --n 1", dir);
  REQUIRE(human.exit_code == 0);
  CHECK_THAT(human.output, Catch::Contains("loss on: \"It is"));
  if (run_shell("/usr/bin/python3 -c 'import jinja2' 2>&1").exit_code != 0) {
    WARN("python3-jinja2 is not installed: the reference comparison is skipped");
    return;
  }
  json chat = json::array();
  std::istringstream lines(read_text(dir + "/chat.jsonl"));
  for (std::string line; std::getline(lines, line);) chat.push_back(json::parse(line));
  const json cases = {{"root", dir}, {"cases", json::array({json{{"name", "inspect"}, {"template", "chat.jinja"},
      {"format", "conversational"}, {"rows", chat}, {"eos_token", ""}, {"completion_only_loss", true},
      {"assistant_only_loss", true}, {"max_length", 200}, {"packing", "bfd"}}})}};
  write_text(dir + "/cases.json", cases.dump());
  const CliResult py = run_shell("/usr/bin/python3 '" + std::string(HFTRAIN_SOURCE_DIR) +
                                 "/tests/reference/sft_reference.py' '" + dir + "/cases.json'");
  REQUIRE(py.exit_code == 0);
  const json want = json::parse(py.output).at("inspect").at("rows");
  REQUIRE(want.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i]["input_ids"] == want[i]["input_ids"]);
    CHECK(rows[i]["labels"] == want[i]["labels"]);
    json bounds = json::array({0});
    for (const auto& n : want[i]["segment_lengths"]) bounds.push_back(bounds.back().get<int64_t>() + n.get<int64_t>());
    CHECK(rows[i]["boundaries"] == bounds);
  }
}

TEST_CASE("the saved model carries the spec's chat template and TRL's eos_token, and generation stops there",
          "[integration][sft]") {
  const std::string dir = fresh_dir("sft_saved_template_eos");
  fs::create_directories(dir + "/tok");
  write_text(dir + "/tok/tokenizer.json", byte_level_tokenizer());
  write_text(dir + "/tok/tokenizer_config.json",
             "{\"eos_token\": \"</s>\", \"chat_template\": \"{{ 'its own template' }}\"}\n");
  write_text(dir + "/tok/special_tokens_map.json", "{\"eos_token\": {\"content\": \"</s>\", \"lstrip\": false}}\n");
  // ChatML without generation markers: assistant-only loss from rendering prefixes.
  const std::string chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  write_text(dir + "/chat.jinja", chatml);
  std::string rows;
  for (int i = 0; i < 16; ++i)
    rows += json{{"messages", {{{"role", "user"}, {"content", "q" + std::to_string(i)}},
                               {{"role", "assistant"}, {"content", "ok"}}}}}.dump() + "\n";
  write_text(dir + "/chat.jsonl", rows);
  write_text(dir + "/spec.yaml",
             "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
             "num_key_value_heads: 2, max_position_embeddings: 64}\n"
             "data: {type: jsonl, train_file: chat.jsonl, tokenizer: tok, chat_template: chat.jinja, "
             "eos_token: \"<|im_end|>\", assistant_only_loss: true, cache_dir: cache}\n"
             "training: {output_dir: out, max_steps: 40, per_device_train_batch_size: 8, learning_rate: 0.01, "
             "logging_steps: 10, save_strategy: \"no\", do_eval: false, seed: 3}\n");
  train(dir, "");
  // As transformers' save_pretrained: the template in chat_template.jinja, not in tokenizer_config.json; the
  // eos token in both token files; the model's eos ids on <|im_end|> (257).
  CHECK(read_text(dir + "/out/chat_template.jinja") == chatml);
  const json config = json::parse(read_text(dir + "/out/tokenizer_config.json"));
  CHECK_FALSE(config.contains("chat_template"));
  CHECK(config["eos_token"] == "<|im_end|>");
  CHECK(json::parse(read_text(dir + "/out/special_tokens_map.json"))["eos_token"] == "<|im_end|>");
  CHECK(json::parse(read_text(dir + "/out/config.json"))["eos_token_id"] == 257);
  CHECK(json::parse(read_text(dir + "/out/generation_config.json"))["eos_token_id"] == 257);
  // The saved directory alone (its template, tokenizer and eos): the prompt rendered with the template's
  // generation prompt, and generation stopping at <|im_end|> after the learnt answer.
  write_text(dir + "/ask.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"q3\"}]}\n");
  write_text(dir + "/saved.yaml", "model: {type: llama, from_pretrained: out}\n"
                                  "data: {type: jsonl, train_file: chat.jsonl, tokenizer: out, cache_dir: cache2}\n"
                                  "training: {output_dir: unused}\n");
  for (const std::string target : {"saved.yaml", "out"}) {
    const CliResult r = run_hftrain("predict " + target + " --prompts ask.jsonl --set training.output_dir=p_" + target +
                                    " --set generation.max_new_tokens=8", dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const json line = predictions(dir + "/p_" + target + "/predictions.jsonl");
    CHECK(line["prompt"] == "<|im_start|>user\nq3<|im_end|>\n<|im_start|>assistant\n");
    CHECK(line["generated_ids"] == json::array({111, 107, 257}));  // o, k, <|im_end|>
  }
  // Told to stop at the old eos instead, it runs on past <|im_end|>.
  const CliResult old = run_hftrain("predict saved.yaml --prompts ask.jsonl --set training.output_dir=p_old "
                                    "--set generation.max_new_tokens=8 --set generation.eos_token_id=258", dir);
  REQUIRE(old.exit_code == 0);
  CHECK(predictions(dir + "/p_old/predictions.jsonl")["generated_ids"].size() == 8);
  // TRL's eos_token is a token of the vocabulary.
  const CliResult bad = run_hftrain("train spec.yaml --set training.output_dir=bad --set data.eos_token=oops", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("data.eos_token: 'oops' is 4 tokens of the tokenizer, not one"));
}
