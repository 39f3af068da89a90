// tokenizer.json files of tests/data/hf_tokenizers (Unigram in the T5 and ALBERT layouts with a Precompiled
// charsmap, Unigram with byte_fallback, a Llama-2 legacy byte_fallback BPE) against the ids HF tokenizers itself
// gives for every string of strings.json (expected_ids.json, written by
// tests/reference/hf_tokenizers/expected_ids.js with the npm package of HF tokenizers' native binding; the files
// by make_fixtures.py from a sentencepiece model trained offline). No network, no HF library at test time.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/load_tokenizer.h"
#include "tokenizers/sentencepiece_tokenizer.h"

using namespace hftrain;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path data_dir() {
  const char* src = std::getenv("HFTRAIN_SOURCE_DIR");
  fs::path root = src ? fs::path(src) : fs::path(__FILE__).parent_path().parent_path().parent_path();
  return root / "tests" / "data" / "hf_tokenizers";
}

Json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return Json::parse(in);
}

}  // namespace

TEST_CASE("tokenizer.json Unigram, Precompiled and Llama-2 BPE files give HF tokenizers' ids", "[unit][tokenizers]") {
  const fs::path dir = data_dir();
  INFO("data: " << dir.string());
  const Json strings = read_json(dir / "strings.json");
  const Json expected = read_json(dir / "expected_ids.json");
  REQUIRE(expected.size() == 4);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    auto tok = HfTokenizer::from_file((dir / it.key()).string(), "data.tokenizer");
    REQUIRE(it.value().size() == strings.size());
    for (std::size_t i = 0; i < strings.size(); ++i) {
      const std::string text = strings[i].get<std::string>();
      INFO(it.key() << " string " << i << ": \"" << text << "\"");
      CHECK(tok->encode(text) == it.value()[i].get<std::vector<int64_t>>());
    }
  }
}

TEST_CASE("a T5 directory with tokenizer.json alone loads the Unigram tokenizer", "[unit][tokenizers]") {
  fs::path dir = fs::temp_directory_path() / ("hftrain_t5_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(data_dir() / "t5_unigram.json", dir / "tokenizer.json");
  auto tok = std::dynamic_pointer_cast<const HfTokenizer>(load_tokenizer(dir.string(), "data.tokenizer"));
  REQUIRE(tok);
  auto sp = tok->special_tokens();
  CHECK(sp.eos == tok->token_to_id("</s>"));
  CHECK(sp.pad == tok->token_to_id("<pad>"));
  CHECK(sp.unk == int64_t{2});  // model.unk_id
  // T5's post-processor appends </s>; the Metaspace decoder restores the text.
  auto enc = tok->encode_for_model("hello world", nullptr, 0);
  REQUIRE(!enc.input_ids.empty());
  CHECK(enc.input_ids.back() == *sp.eos);
  CHECK(tok->decode(tok->encode("hello world"), true) == "hello world");
  fs::remove_all(dir);
}

// One 64 KB BPE word (the quadratic merge loop took minutes on it): it encodes and round-trips. How fast is a
// benchmark's question (bench/tokenizer_bench, bench/RESULTS.md), not a timed test's.
TEST_CASE("BPE merging handles one 64 KB word (Llama-2 legacy layout)", "[unit][tokenizers]") {
  auto tok = HfTokenizer::from_file((data_dir() / "llama2_legacy_bpe.json").string(), "data.tokenizer");
  std::string base = "the quick brown fox jumps over the lazy dog while tokenizers split words into pieces ";
  std::string row;
  while (row.size() < 64 * 1024) row += base;
  auto ids = tok->encode(row);
  CHECK(ids.size() > row.size() / 8);
  CHECK(tok->decode(ids, true) == row);
}
