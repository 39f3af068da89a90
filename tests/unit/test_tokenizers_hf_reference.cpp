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

#include "hf_tokenizer_fixtures.h"
#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/load_tokenizer.h"
#include "tokenizers/sentencepiece_tokenizer.h"

using namespace hftrain;
namespace fs = std::filesystem;

TEST_CASE("tokenizer.json Unigram, Precompiled and Llama-2 BPE files give HF tokenizers' ids", "[unit][tokenizers]") {
  hftrain_test::check_expected_ids(hftrain_test::tokenizer_fixture_dir("hf_tokenizers"), 4);
}

TEST_CASE("a T5 directory with tokenizer.json alone loads the Unigram tokenizer", "[unit][tokenizers]") {
  fs::path dir = fs::temp_directory_path() / ("hftrain_t5_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(hftrain_test::tokenizer_fixture_dir("hf_tokenizers") / "t5_unigram.json", dir / "tokenizer.json");
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
  const auto file = hftrain_test::tokenizer_fixture_dir("hf_tokenizers") / "llama2_legacy_bpe.json";
  auto tok = HfTokenizer::from_file(file.string(), "data.tokenizer");
  std::string base = "the quick brown fox jumps over the lazy dog while tokenizers split words into pieces ";
  std::string row;
  while (row.size() < 64 * 1024) row += base;
  auto ids = tok->encode(row);
  CHECK(ids.size() > row.size() / 8);
  CHECK(tok->decode(ids, true) == row);
}
