// sentencepiece .model files: a tiny model is trained here with libsentencepiece's trainer (through our module), then loaded through
// load_tokenizer and checked for properties known independently of our code: the special ids we asked the
// trainer for, lossless round trips, pieces that concatenate to the input with U+2581 for spaces, and
// bos / eos insertion per tokenizer_config.json.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/load_tokenizer.h"
#include "tokenizers/sentencepiece_tokenizer.h"
#include "util/error.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

// Removes a scratch directory when it goes out of scope (for the trained model: at process exit).
struct RemoveOnExit {
  fs::path dir;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Trains (once per process) a small BPE sentencepiece model; returns the directory holding tokenizer.model.
fs::path trained_model_dir() {
  static RemoveOnExit scratch{fs::temp_directory_path() / ("hftrain_tok_" + std::to_string(getpid()) + "_spm")};
  static fs::path dir = [] {
    fs::path d = scratch.dir;
    fs::remove_all(d);
    fs::create_directories(d);
    {
      std::ofstream corpus(d / "corpus.txt");
      const char* lines[] = {"the low lower lowest", "hello world", "the world is wide", "a new lower low",
                             "hello the newest world", "wide world of words"};
      for (int rep = 0; rep < 20; ++rep)
        for (const char* l : lines) corpus << l << "\n";
    }
    train_sentencepiece("--input=" + (d / "corpus.txt").string() + " --model_prefix=" + (d / "tokenizer").string() +
                        " --model_type=bpe --vocab_size=60 --hard_vocab_limit=false --character_coverage=1.0"
                        " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=3 --num_threads=1 --minloglevel=2");
    return d;
  }();
  return dir;
}

std::string join(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

}  // namespace

TEST_CASE("sentencepiece model: special ids, round trips and pieces", "[unit][tokenizers]") {
  fs::path dir = trained_model_dir();
  auto base = load_tokenizer((dir / "tokenizer.model").string(), "data.tokenizer");
  auto tok = std::dynamic_pointer_cast<const SentencePieceTokenizer>(base);
  REQUIRE(tok);
  auto sp = tok->special_tokens();
  CHECK(sp.unk == 0);
  CHECK(sp.bos == 1);
  CHECK(sp.eos == 2);
  CHECK(sp.pad == 3);
  CHECK(tok->id_to_piece(0) == "<unk>");
  CHECK(tok->id_to_piece(1) == "<s>");
  CHECK(tok->id_to_piece(2) == "</s>");
  CHECK(tok->piece_to_id("</s>") == 2);
  CHECK(tok->vocab_size() > 20);
  CHECK(tok->vocab_size() <= 60);
  for (std::string text : {"hello world", "the newest lower words", "a wide world"}) {
    auto ids = tok->encode(text);
    CHECK(!ids.empty());
    CHECK(tok->decode(ids) == text);
    std::string expected = "\xE2\x96\x81" + text;  // the dummy prefix, and U+2581 for every space
    for (std::size_t p = 0; (p = expected.find(' ', p)) != std::string::npos;) expected.replace(p, 1, "\xE2\x96\x81");
    CHECK(join(tok->tokenize(text)) == expected);
    auto pieces = tok->tokenize(text);
    REQUIRE(pieces.size() == ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) CHECK(tok->id_to_piece(ids[i]) == pieces[i]);
  }
  // A frequent word of the corpus is one piece.
  CHECK(tok->tokenize("world") == std::vector<std::string>{"\xE2\x96\x81world"});
  // A character never seen in training is <unk>.
  auto ids = tok->encode("q");
  CHECK(std::find(ids.begin(), ids.end(), 0) != ids.end());
}

TEST_CASE("sentencepiece encode_for_model adds bos (and eos per tokenizer_config.json)", "[unit][tokenizers]") {
  fs::path dir = trained_model_dir();
  fs::path with_eos = dir / "with_eos";
  fs::create_directories(with_eos);
  fs::copy_file(dir / "tokenizer.model", with_eos / "tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(with_eos / "tokenizer_config.json") << R"({"add_bos_token": true, "add_eos_token": true})";

  auto plain = load_tokenizer(dir.string(), "data.tokenizer");  // directory with tokenizer.model only
  auto text_ids = plain->encode("hello world");
  Encoding e = plain->encode_for_model("hello world", nullptr, 0);
  std::vector<int64_t> expected{1};
  expected.insert(expected.end(), text_ids.begin(), text_ids.end());
  CHECK(e.input_ids == expected);
  CHECK(e.special_tokens_mask[0] == 1);

  auto eos = load_tokenizer(with_eos.string(), "data.tokenizer");
  std::string pair = "wide";
  auto pair_ids = eos->encode(pair);
  e = eos->encode_for_model("hello world", &pair, 0);
  expected = {1};
  expected.insert(expected.end(), text_ids.begin(), text_ids.end());
  expected.push_back(2);
  expected.push_back(1);
  expected.insert(expected.end(), pair_ids.begin(), pair_ids.end());
  expected.push_back(2);
  CHECK(e.input_ids == expected);
  CHECK(e.token_type_ids.front() == 0);
  CHECK(e.token_type_ids.back() == 1);
  // Truncation keeps room for the 2 special tokens: max_length 3 leaves one text token.
  e = eos->encode_for_model("hello world", nullptr, 3);
  CHECK(e.input_ids == std::vector<int64_t>{1, text_ids[0], 2});
}

TEST_CASE("sentencepiece load errors name the file", "[unit][tokenizers]") {
  RemoveOnExit scratch{fs::temp_directory_path() / ("hftrain_tok_" + std::to_string(getpid()) + "_spm_bad")};
  fs::path dir = scratch.dir;
  fs::create_directories(dir);
  std::ofstream(dir / "broken.model") << "not a protobuf";
  try {
    load_tokenizer((dir / "broken.model").string(), "data.tokenizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("data.tokenizer") && Catch::Contains("broken.model"));
  }
  CHECK_THROWS_AS(load_tokenizer((dir / "missing.model").string(), "data.tokenizer"), ConfigError);
}

TEST_CASE("a directory whose tokenizer.json uses an unsupported component falls back to its spiece.model", "[unit][tokenizers]") {
  fs::path dir = trained_model_dir() / "t5_like";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"pre_tokenizer": {"type": "CharDelimiterSplit", "delimiter": " "},
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}})";
  CHECK_THROWS_AS(load_tokenizer((dir / "tokenizer.json").string(), "data.tokenizer"), ConfigError);
  fs::copy_file(trained_model_dir() / "tokenizer.model", dir / "spiece.model", fs::copy_options::overwrite_existing);
  auto tok = std::dynamic_pointer_cast<const SentencePieceTokenizer>(load_tokenizer(dir.string(), "data.tokenizer"));
  REQUIRE(tok);
  CHECK(tok->decode(tok->encode("hello world")) == "hello world");
  // A supported (Unigram) tokenizer.json is preferred to the sentencepiece model, as transformers' fast tokenizers.
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}})";
  CHECK(std::dynamic_pointer_cast<const HfTokenizer>(load_tokenizer(dir.string(), "data.tokenizer")));
}
