// Shared by the tokenizer.json reference tests: a committed fixture folder of tests/data (tokenizer.json
// files, strings.json and the ids HF tokenizers gave for them, expected_ids.json), and the check that
// hftrain's HfTokenizer gives exactly those ids for every file and string.
#pragma once

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizers/hf_tokenizer.h"

namespace hftrain_test {

inline std::filesystem::path tokenizer_fixture_dir(const std::string& name) {
  const char* src = std::getenv("HFTRAIN_SOURCE_DIR");
  std::filesystem::path root = src ? std::filesystem::path(src)
                                   : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return root / "tests" / "data" / name;
}

inline nlohmann::json read_fixture_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Every tokenizer file named in `dir`/expected_ids.json (there must be `files` of them) encodes every string
// of strings.json to HF's ids.
inline void check_expected_ids(const std::filesystem::path& dir, std::size_t files) {
  INFO("data: " << dir.string());
  const nlohmann::json strings = read_fixture_json(dir / "strings.json");
  const nlohmann::json expected = read_fixture_json(dir / "expected_ids.json");
  REQUIRE(expected.size() == files);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    auto tok = hftrain::HfTokenizer::from_file((dir / it.key()).string(), "data.tokenizer");
    REQUIRE(it.value().size() == strings.size());
    for (std::size_t i = 0; i < strings.size(); ++i) {
      const std::string text = strings[i].get<std::string>();
      INFO(it.key() << " string " << i << ": \"" << text << "\"");
      CHECK(tok->encode(text) == it.value()[i].get<std::vector<int64_t>>());
    }
  }
}

}  // namespace hftrain_test
