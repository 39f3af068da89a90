// Shared pieces of the tokenizer.json reader: the JSON type, the two format errors every pipeline stage throws
// (turned into a ConfigError naming the file by HfTokenizer::from_file), typed field lookups, and the
// {"String"}/{"Regex"} `pattern` objects that Replace normalizers, Split pre-tokenizers and Replace decoders share.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizers/unicode_text.h"

namespace hftrain::hf {

using Json = nlohmann::json;
namespace uni = hftrain::unicode;

// Problems in the file's structure; turned into a ConfigError naming the file by from_file.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A component type this reader does not implement.
struct UnsupportedError : FormatError {
  using FormatError::FormatError;
};

bool get_bool(const Json& j, const char* key, bool fallback);
std::string get_string(const Json& j, const char* key, const std::string& fallback);
std::string type_of(const Json& j, const std::string& what);
void replace_all(std::string& s, const std::string& from, const std::string& to);

// A `pattern` object: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::shared_ptr<uni::Regex> regex;
  std::vector<std::pair<std::size_t, std::size_t>> find_all(const std::string& s) const;
};

Pattern parse_pattern(const Json& j, const std::string& what);
std::string replace_pattern(const std::string& s, const Pattern& p, const std::string& content);

}  // namespace hftrain::hf
