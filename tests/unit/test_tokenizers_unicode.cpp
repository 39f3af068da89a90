// Unicode edges of tokenizer.json files against HF tokenizers: the GPT-2 (ByteLevel regex), Llama-3 (Split
// regex + ByteLevel), Qwen2 (NFC, Qwen's Split regex + ByteLevel), Gemma (spaces as U+2581, no pre-tokenizer,
// BPE with byte fallback) and BERT (BertNormalizer + BertPreTokenizer + WordPiece) files of
// tests/data/hf_tokenizers_unicode give the ids HF gives (expected_ids.json, written by
// tests/reference/hf_tokenizers/expected_ids.js) for a corpus of the code points where PCRE2, utf8proc and HF's
// tables disagree; the hidden "[unicode_sweep]" case compares every code point of planes 0-3 (driven by
// tests/reference/hf_tokenizers/unicode_sweep.js with HF's ids computed at test time).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hf_tokenizer_fixtures.h"
#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/unicode_text.h"

using namespace hftrain;
namespace fs = std::filesystem;
using Json = nlohmann::json;

TEST_CASE("GPT-2, Llama-3, Qwen2, Gemma and BERT tokenizer.json files give HF tokenizers' ids on Unicode edge cases",
          "[unit][tokenizers]") {
  hftrain_test::check_expected_ids(hftrain_test::tokenizer_fixture_dir("hf_tokenizers_unicode"), 5);
}

TEST_CASE("Oniguruma's space and letter and number classes replace PCRE2's", "[unit][tokenizers]") {
  namespace uni = hftrain::unicode;
  // U+180E (MONGOLIAN VOWEL SEPARATOR) is no \s for Oniguruma (PCRE2 has it in \s).
  uni::Regex space(R"(\s+)");
  CHECK(space.find_all("a\xE1\xA0\x8E" "b").empty());
  CHECK(space.find_all("a \t\xE3\x80\x80" "b").size() == 1);
  // Kawi letter U+11F04 (Unicode 15), CJK Ext. H U+31350 (15.0), Ext. I U+2EBF0 (15.1) are \p{L}.
  uni::Regex letters(R"(\p{L}+)");
  const std::string newer = uni::to_utf8(0x11F04) + uni::to_utf8(0x31350) + uni::to_utf8(0x2EBF0);
  auto m = letters.find_all("x" + newer + " y");
  REQUIRE(m.size() == 2);
  CHECK(m[0] == std::make_pair(std::size_t{0}, 1 + newer.size()));
  // Kawi digit U+11F50 is \p{N}; inside a negated class too.
  uni::Regex others(R"([^\s\p{L}\p{N}]+)");
  CHECK(others.find_all(uni::to_utf8(0x11F50) + uni::to_utf8(0x180E)) ==
        std::vector<std::pair<std::size_t, std::size_t>>{{4, 7}});
  // Escapes inside \Q...\E and other properties stay as written.
  CHECK(uni::with_oniguruma_classes(R"(\Q\s\E\p{Lu}\d)") == R"(\Q\s\E\p{Lu}\d)");
  CHECK(uni::with_oniguruma_classes(R"([^\S])").find("\\x{3000}") == std::string::npos);
}

TEST_CASE("BERT's tables and Rust's lowercase as HF tokenizers has them", "[unit][tokenizers]") {
  namespace uni = hftrain::unicode;
  CHECK_FALSE(uni::is_bert_control(0x0378));  // unassigned: kept (WordPiece then gives [UNK])
  CHECK(uni::is_bert_control(0xE0001));       // format character: dropped
  CHECK(uni::is_bert_control(0x180E));
  CHECK(uni::is_bert_punctuation(0x111C9));   // punctuation in HF's older table
  CHECK_FALSE(uni::is_bert_punctuation(0x10EAD));  // assigned later: not punctuation there
  CHECK(uni::is_combining_mark(0x0903));      // Mc is stripped too
  CHECK(uni::lowercase("\xC4\xB0") == "i\xCC\x87");  // U+0130 -> "i\u0307"
  CHECK(uni::lowercase(uni::to_utf8(0x10D50)) == uni::to_utf8(0x10D70));  // Garay (Unicode 16)
  CHECK(uni::lowercase("\xCE\xA3" "A") == "\xCF\x83" "a");  // no final-sigma rule
  CHECK(uni::normalize(uni::to_utf8(0x11938), "NFD") == uni::to_utf8(0x11938));  // kept whole by HF's NFD
  CHECK(uni::normalize("\xC3\xA9", "NFD") == "e\xCC\x81");
}

// Driven by tests/reference/hf_tokenizers/unicode_sweep.js: HFTRAIN_UNICODE_SWEEP names a JSON file
// {"<tokenizer.json path>": {"strings": [...], "ids": [[...], ...]}} of HF's ids; every string must agree.
TEST_CASE("Every code point of planes 0-3 gives HF tokenizers' ids (driven by unicode_sweep.js)", "[.][unicode_sweep]") {
  const char* path = std::getenv("HFTRAIN_UNICODE_SWEEP");
  REQUIRE(path != nullptr);
  const Json sweep = hftrain_test::read_fixture_json(path);
  REQUIRE(!sweep.empty());
  for (auto it = sweep.begin(); it != sweep.end(); ++it) {
    auto tok = HfTokenizer::from_file(it.key(), "sweep.tokenizer");
    const Json& strings = it.value().at("strings");
    const Json& ids = it.value().at("ids");
    REQUIRE(strings.size() == ids.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < strings.size(); ++i) {
      const std::string text = strings[i].get<std::string>();
      if (tok->encode(text) == ids[i].get<std::vector<int64_t>>()) continue;
      if (++differ <= 20) {
        std::string hex;
        for (char32_t c : hftrain::unicode::code_points(text)) hex += " U+" + std::to_string(static_cast<unsigned>(c));
        WARN(it.key() << ": string" << hex << " differs from HF");
      }
    }
    INFO(it.key() << ": " << strings.size() << " strings");
    CHECK(differ == 0);
  }
}
