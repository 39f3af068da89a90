// Chat fine-tuning data as TRL's SFTTrainer prepares it (lib/data chat_template, sft_rows, sft_source,
// best_fit_packing): chat templates found beside the tokenizer or named by the spec, the dataset format told
// from the columns, assistant-only (generation markers, else prefix renders) and completion-only label masks,
// truncation, bfd / wrapped packing, the tokenizer files a run saves, and the reference case: token ids and labels of every format under several templates equal to
// tests/reference/sft_reference.py (python3-jinja2 in HF's environment, a byte tokenizer).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "data/best_fit_packing.h"
#include "data/chat_template.h"
#include "data/file_sources.h"
#include "data/saved_tokenizer.h"
#include "data/sft_rows.h"
#include "tokenizers/hf_tokenizer.h"
#include "util/error.h"
#include "scratch_files.h"

using hftrain_test::scratch;
using hftrain_test::write;
using hftrain_test::error_of;

using namespace hftrain;
namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

fs::path sft_source_dir() {
  const char* src = std::getenv("HFTRAIN_SOURCE_DIR");
  return src ? fs::path(src) : fs::path(__FILE__).parent_path().parent_path().parent_path();
}

std::string templates() { return (sft_source_dir() / "tests" / "data" / "chat_templates").string(); }

FileDataSource::Options chat_options(const std::string& dir, const std::string& template_file) {
  FileDataSource::Options o;
  o.train_file = dir + "/train.jsonl";
  o.cache_dir = dir + "/cache";
  o.chat_template = templates() + "/" + template_file;
  o.eos_token = "</s>";
  return o;
}

const char* kChat =
    R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})"
    "\n"
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}, )"
    R"({"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"}, {"role": "assistant", "content": "6, é"}]})"
    "\n";

}  // namespace

TEST_CASE("sft chat templates come from tokenizer_config.json, chat_template.jinja or the spec", "[unit][sft]") {
  const std::string dir = scratch("templates");
  write(dir + "/tokenizer_config.json",
        R"({"eos_token": {"content": "</s>"}, "bos_token": "<s>", "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"})");
  auto t = ChatTemplate::load({dir, "", "", "", ""});
  REQUIRE(t);
  const ordered_json msgs = ordered_json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  CHECK(t->render(msgs, false).text == "<s>a</s>b</s>");
  CHECK_THAT(t->name(), Catch::Contains("tokenizer_config.json"));
  // A named list: "default" unless chat_template_name picks another; an unknown name lists the names.
  write(dir + "/tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  CHECK(ChatTemplate::load({dir, "", "", "", ""})->render(msgs, false).text == "D");
  CHECK(ChatTemplate::load({dir, "", "tool_use", "", ""})->render(msgs, false).text == "T");
  CHECK_THAT(error_of([&] { ChatTemplate::load({dir, "", "rag", "", ""}); }),
             Catch::Contains("no chat template named 'rag'") && Catch::Contains("default, tool_use"));
  // chat_template.jinja beside it wins, as transformers reads it; the spec's file wins over both.
  write(dir + "/chat_template.jinja", "J{{ eos_token }}");
  CHECK(ChatTemplate::load({dir, "", "", "<end>", ""})->render(msgs, false).text == "J<end>");
  write(dir + "/mine.jinja", "M");
  CHECK(ChatTemplate::load({dir, dir + "/mine.jinja", "", "", ""})->render(msgs, false).text == "M");
  CHECK_FALSE(ChatTemplate::load({"bytes", "", "", "", ""}));
  // A template error names the file, line and column.
  write(dir + "/bad.jinja", "ok\n{% if %}");
  CHECK_THAT(error_of([&] { ChatTemplate::load({dir, dir + "/bad.jinja", "", "", ""}); }),
             Catch::Contains("bad.jinja:2:"));
  CHECK_THAT(error_of([&] { ChatTemplate::load({dir, dir + "/none.jinja", "", "", ""}); }),
             Catch::Contains("data.chat_template") && Catch::Contains("none.jinja"));
}

TEST_CASE("a saved tokenizer carries the spec's chat template and eos token as transformers saves them", "[unit][sft]") {
  const std::string dir = scratch("saved_tokenizer");
  write(dir + "/tokenizer.json", "{}");
  write(dir + "/tokenizer_config.json", R"({"model_max_length": 8, "chat_template": "old", "eos_token": "</s>"})");
  write(dir + "/chat_template.json", R"({"chat_template": "older"})");
  ByteTokenizer tokenizer;
  tokenizer.set_files({{dir + "/tokenizer.json", "tokenizer.json"}, {dir + "/tokenizer_config.json", "tokenizer_config.json"},
                       {dir + "/chat_template.json", "chat_template.json"}});
  auto named = [](const std::vector<SavedTokenizerFile>& files, const std::string& name) {
    for (const auto& f : files)
      if (f.name == name) return f.text;
    return std::string("<none>");
  };
  // Nothing changed: the files as they are, byte for byte.
  auto files = tokenizer_files_to_save(tokenizer, {});
  REQUIRE(files.size() == 3);
  CHECK(named(files, "tokenizer_config.json") == R"({"model_max_length": 8, "chat_template": "old", "eos_token": "</s>"})");
  // The template in chat_template.jinja alone; the eos token in tokenizer_config.json, keys in their order.
  files = tokenizer_files_to_save(tokenizer, {"NEW {{ messages }}", "<|end|>", 7});
  CHECK(named(files, "chat_template.jinja") == "NEW {{ messages }}");
  CHECK(named(files, "chat_template.json") == "<none>");
  CHECK(named(files, "tokenizer_config.json") == "{\n  \"model_max_length\": 8,\n  \"eos_token\": \"<|end|>\"\n}\n");
  CHECK(named(files, "special_tokens_map.json") == "<none>");
  // A tokenizer.json alone gets a tokenizer_config.json holding the eos token; special_tokens_map.json (read
  // last) is changed where it exists.
  write(dir + "/special_tokens_map.json", R"({"eos_token": {"content": "</s>", "lstrip": false}, "pad_token": "<pad>"})");
  tokenizer.set_files({{dir + "/tokenizer.json", "tokenizer.json"}, {dir + "/special_tokens_map.json", "special_tokens_map.json"}});
  files = tokenizer_files_to_save(tokenizer, {"", "<|end|>", 7});
  CHECK(named(files, "tokenizer_config.json") == "{\n  \"eos_token\": \"<|end|>\"\n}\n");
  CHECK(ordered_json::parse(named(files, "special_tokens_map.json")) ==
        ordered_json::parse(R"({"eos_token": "<|end|>", "pad_token": "<pad>"})"));
  CHECK(tokenizer_files_to_save(ByteTokenizer(), {"T", "<|end|>", 7}).empty());  // no files: nothing saved
}

TEST_CASE("sft formats are told from the columns, masks follow them, refusals name the option", "[unit][sft]") {
  const std::string dir = scratch("formats");
  write(dir + "/train.jsonl", kChat);
  auto o = chat_options(dir, "generation_markers.jinja");
  o.assistant_only_loss = true;
  FileDataSource src(o, RowFormat::kJsonl);
  CHECK(src.data_format() == "conversational (column 'messages')");
  const Example e = src.split("train")->get(0);
  const std::string text(e.input_ids.begin(), e.input_ids.end());
  CHECK(text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n");
  std::string scored;
  for (std::size_t i = 0; i < e.labels.size(); ++i)
    if (e.labels[i] != -100) scored += static_cast<char>(e.input_ids[i]);
  CHECK(scored == "hello<|im_end|>");
  // A row that also has the text column is plain text, as before chat rows were read.
  Row both;
  both.fields = {{"text", "t"}, {"messages", "[]"}};
  both.is_string = {{"text", true}, {"messages", false}};
  CHECK(detect_sft_format({both}, "") == SftFormat::kPlain);
  CHECK(detect_sft_format({both}, "", "body") == SftFormat::kConversational);
  // Without generation markers the assistant's turns are found by rendering prefixes: the text that
  // messages[:i + 1] adds to messages[:i] with the generation prompt.
  o = chat_options(dir, "chatml_tools.jinja");
  o.assistant_only_loss = true;
  const Example c = FileDataSource(o, RowFormat::kJsonl).split("train")->get(0);
  std::string chatml_scored;
  for (std::size_t i = 0; i < c.labels.size(); ++i)
    if (c.labels[i] != -100) chatml_scored += static_cast<char>(c.input_ids[i]);
  CHECK(chatml_scored == "hello<|im_end|>\n");
  // Where a prefix does not render as the start of the whole conversation (Qwen3 keeps the reasoning block
  // on the last turn only), the row is refused naming the template, the row and the message.
  o = chat_options(dir, "qwen3_style.jinja");
  o.assistant_only_loss = true;
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }),
             Catch::Contains("train.jsonl:2: data.assistant_only_loss") && Catch::Contains("qwen3_style.jinja") &&
                 Catch::Contains("message 2 (assistant), messages[:i + 1] does not render"));
  // Conversational rows without a template; options of other formats refused by name.
  o = chat_options(dir, "");
  o.chat_template.clear();
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }), Catch::Contains("data.chat_template: the rows are conversational"));
  write(dir + "/train.jsonl", "{\"prompt\": \"Q: 1+1\", \"completion\": \" A: 2\"}\n");
  o = chat_options(dir, "generation_markers.jinja");
  o.assistant_only_loss = true;
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }), Catch::Contains("data.assistant_only_loss: applies to conversational"));
  o.assistant_only_loss = false;
  FileDataSource pc(o, RowFormat::kJsonl);
  CHECK(pc.data_format() == "prompt-completion (columns 'prompt', 'completion')");
  const Example p = pc.split("train")->get(0);
  CHECK(std::string(p.input_ids.begin(), p.input_ids.end()) == "Q: 1+1 A: 2</s>");
  CHECK(std::count(p.labels.begin(), p.labels.end(), -100) == 6);
  o.eos_token.clear();
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }), Catch::Contains("data.eos_token"));
  // A task other than causal_lm refuses the SFT options.
  write(dir + "/train.jsonl", "{\"text\": \"a\", \"label\": \"x\"}\n");
  o = FileDataSource::Options{};
  o.train_file = dir + "/train.jsonl";
  o.cache_dir = dir + "/cache";
  o.task = "sequence_classification";
  o.packing = true;
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }), Catch::Contains("data.packing: applies to task causal_lm"));
}

TEST_CASE("sft bfd packing fills the tightest row, truncates long examples, and keeps each span", "[unit][sft]") {
  auto ex = [](int64_t n, int64_t base) {
    Example e;
    for (int64_t i = 0; i < n; ++i) e.input_ids.push_back(base + i);
    e.labels = e.input_ids;
    e.labels[0] = -100;
    return e;
  };
  // Lengths 5, 3, 9 (cut to 8), 2, 4 into rows of 8: [8], [5 3], [4 2].
  const auto rows = pack_examples({ex(5, 100), ex(3, 200), ex(9, 300), ex(2, 400), ex(4, 500)}, "bfd", 8);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].segment_lengths == std::vector<int64_t>{8});
  CHECK(rows[1].segment_lengths == std::vector<int64_t>{5, 3});
  CHECK(rows[2].segment_lengths == std::vector<int64_t>{4, 2});
  CHECK(rows[1].input_ids.front() == 100);
  CHECK(rows[1].input_ids[5] == 200);
  CHECK(rows[1].labels[5] == -100);  // each example's own labels travel with it
  const auto wrapped = pack_examples({ex(5, 0), ex(4, 10)}, "wrapped", 4);
  REQUIRE(wrapped.size() == 3);
  CHECK(wrapped[2].input_ids == std::vector<int64_t>{13});
  CHECK(wrapped[0].segment_lengths.empty());
  CHECK_THAT(error_of([&] { pack_examples({ex(2, 0)}, "bfd", 0); }), Catch::Contains("data.max_length"));
}

TEST_CASE("sft token offsets of a byte-level BPE tokenizer cover a character split over tokens", "[unit][sft]") {
  const std::string dir = scratch("offsets");
  write(dir + "/tokenizer.json", R"({"version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 6, "content": "<|e|>", "single_word": false, "lstrip": false, "rstrip": false,
                      "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"h": 0, "i": 1, "\u0120": 2, "hi": 3, "\u00c3": 4, "\u00a9": 5}, "merges": ["h i"]}})");
  const auto tok = HfTokenizer::from_file(dir + "/tokenizer.json", "data.tokenizer");
  const std::string text = "<|e|>hi \xC3\xA9<|e|>";  // é is two byte-level tokens, each U+FFFD alone
  const std::vector<int64_t> ids = tok->encode(text);
  REQUIRE(ids == std::vector<int64_t>{6, 3, 2, 4, 5, 6});
  const auto offsets = token_byte_offsets(*tok, text, ids);
  REQUIRE(offsets);
  using Span = std::pair<std::size_t, std::size_t>;
  CHECK(*offsets == std::vector<Span>{{0, 5}, {5, 7}, {7, 8}, {8, 10}, {8, 10}, {10, 15}});
  // The assistant span "\xC3\xA9<|e|>" marks both halves of the character and the end token.
  CHECK(assistant_token_mask(*offsets, {{8, 15}}) == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  // A span ending in that character: char_to_token gives its first token, so transformers marks only that one.
  CHECK(assistant_token_mask(*offsets, {{5, 10}}) == std::vector<int64_t>{0, 1, 1, 1, 0, 0});
}

TEST_CASE("sft ids and label masks equal TRL's under several templates, truncated and packed", "[reference][sft]") {
  if (std::system("/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1") != 0) {
    WARN("python3-jinja2 is not installed: the SFT reference comparison is skipped");
    return;
  }
  const std::string dir = scratch("reference");
  const ordered_json chat_rows = [] {
    ordered_json rows = ordered_json::array();
    std::istringstream in(kChat);
    for (std::string line; std::getline(in, line);) rows.push_back(ordered_json::parse(line));
    return rows;
  }();
  const ordered_json pc_rows = ordered_json::parse(
      R"([{"prompt": "Q: 12+30=", "completion": " 42"}, {"prompt": "Translate 'chat': ", "completion": " cat</s>"},
          {"prompt": "x", "completion": "a long completion that is cut"}])");
  const ordered_json cpc_rows = ordered_json::parse(
      R"([{"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "hello there"}]},
          {"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}], "completion": [{"role": "assistant", "content": "v"}]}])");
  ordered_json tool_rows = chat_rows;
  tool_rows.push_back(ordered_json::parse(
      R"({"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "",
          "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
          {"role": "tool", "content": "{\"celsius\": 21}"}, {"role": "assistant", "content": "21 °C in Paris."}]})"));
  const ordered_json lm_rows = ordered_json::parse(R"([{"body": "first text"}, {"body": "second</s>"}, {"body": "3"}])");
  struct Case {
    std::string name, tmpl, format;
    ordered_json rows;
    bool assistant_only = false, completion_only = true;
    int64_t max_length = 0;
    std::string packing;
    std::string refused;  // non-empty: both refuse the rows; hftrain's message holds this
  };
  const std::vector<Case> cases = {
      {"chat_generation_assistant", "generation_markers.jinja", "conversational", chat_rows, true},
      {"chat_generation_truncated", "generation_markers.jinja", "conversational", chat_rows, true, true, 70},
      {"chat_chatml_all_tokens", "chatml_tools.jinja", "conversational", chat_rows},
      {"chat_mistral_bfd", "mistral_style.jinja", "conversational", chat_rows, false, true, 90, "bfd"},
      {"chat_generation_bfd", "generation_markers.jinja", "conversational", chat_rows, true, true, 120, "bfd"},
      {"prompt_completion", "", "prompt_completion", pc_rows, false, true, 0},
      {"prompt_completion_wrapped", "", "prompt_completion", pc_rows, false, true, 16, "wrapped"},
      {"prompt_completion_full_loss", "", "prompt_completion", pc_rows, false, false, 20},
      {"conversational_prompt_completion", "qwen3_style.jinja", "conversational_prompt_completion", cpc_rows},
      {"conversational_prompt_completion_assistant", "generation_markers.jinja", "conversational_prompt_completion",
       cpc_rows, true, true, 0, "bfd"},
      {"language_modeling", "", "language_modeling", lm_rows, false, true, 0, "bfd"},
      // Templates without generation markers: assistant turns from rendering prefixes.
      {"chat_llama3_prefix_assistant", "llama3_header.jinja", "conversational", chat_rows, true},
      {"chat_llama3_prefix_truncated_bfd", "llama3_header.jinja", "conversational", chat_rows, true, true, 180, "bfd"},
      {"chat_chatml_prefix_tool_calls", "chatml_tools.jinja", "conversational", tool_rows, true},
      {"conversational_prompt_completion_chatml_prefix", "chatml_tools.jinja", "conversational_prompt_completion",
       cpc_rows, true, false},
      {"chat_mistral_prefix_refused", "mistral_style.jinja", "conversational", chat_rows, true, true, 0, "",
       "message 2 (assistant), messages[:i] with the generation prompt does not render"},
      {"chat_qwen3_prefix_refused", "qwen3_style.jinja", "conversational", chat_rows, true, true, 0, "",
       "message 2 (assistant), messages[:i + 1] does not render"},
  };
  ordered_json spec = {{"root", templates()}, {"cases", ordered_json::array()}};
  for (const Case& c : cases)
    spec["cases"].push_back({{"name", c.name}, {"template", c.tmpl.empty() ? ordered_json() : ordered_json(c.tmpl)},
                             {"format", c.format}, {"rows", c.rows}, {"eos_token", "</s>"}, {"text_field", "body"},
                             {"completion_only_loss", c.completion_only}, {"assistant_only_loss", c.assistant_only},
                             {"max_length", c.max_length == 0 && !c.packing.empty() ? 4096 : c.max_length},
                             {"packing", c.packing.empty() ? ordered_json() : ordered_json(c.packing)}});
  write(dir + "/cases.json", spec.dump());
  const std::string cmd = "/usr/bin/python3 '" + (sft_source_dir() / "tests" / "reference" / "sft_reference.py").string() +
                          "' '" + dir + "/cases.json'";
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) out.append(buf.data(), n);
  REQUIRE(pclose(pipe) == 0);
  const ordered_json want_all = ordered_json::parse(out);
  for (const Case& c : cases) {
    INFO(c.name);
    std::string jsonl;
    for (const auto& r : c.rows) jsonl += r.dump() + "\n";
    write(dir + "/train.jsonl", jsonl);
    FileDataSource::Options o = chat_options(dir, c.tmpl);
    if (c.tmpl.empty()) o.chat_template.clear();
    if (c.format == "language_modeling") o.dataset_text_field = "body";
    o.assistant_only_loss = c.assistant_only;
    if (c.format.find("prompt_completion") != std::string::npos) o.completion_only_loss = c.completion_only;
    o.packing = !c.packing.empty();
    if (o.packing) o.packing_strategy = c.packing;
    o.max_length = c.max_length == 0 && o.packing ? 4096 : c.max_length;
    const ordered_json& want = want_all.at(c.name);
    if (!c.refused.empty()) {
      REQUIRE(want.contains("error"));
      CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }),
                 Catch::Contains("train.jsonl:2: data.assistant_only_loss") && Catch::Contains(c.tmpl) &&
                     Catch::Contains(c.refused));
      continue;
    }
    REQUIRE_FALSE(want.contains("error"));
    FileDataSource src(o, RowFormat::kJsonl);
    auto train = src.split("train");
    REQUIRE(train->size() == static_cast<int64_t>(want["rows"].size()));
    for (int64_t i = 0; i < train->size(); ++i) {
      const Example e = train->get(i);
      CHECK(e.input_ids == want["rows"][i]["input_ids"].get<std::vector<int64_t>>());
      CHECK(e.labels == want["rows"][i]["labels"].get<std::vector<int64_t>>());
      CHECK(e.segment_lengths == want["rows"][i]["segment_lengths"].get<std::vector<int64_t>>());
    }
  }
}
