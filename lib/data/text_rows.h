// Reading tabular text files into rows of named string fields: JSON Lines (one object per line), CSV /
// TSV (RFC 4180 quoting, header row) and plain text (one row per line, column "text", as HF's `text`
// loader). Free of LibTorch. Problems in a row are reported as BadRow (file:line, column, reason) so the
// caller decides between an error and skip-and-count; problems with a whole file throw ConfigError.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hftrain {

enum class RowFormat { kJsonl, kCsv, kTsv, kText };

struct Row {
  int64_t line = 0;                                   // 1-based line where the row starts
  std::map<std::string, std::optional<std::string>> fields;  // nullopt = JSON null
  std::map<std::string, bool> is_string;             // JSON: the value was a string (numbers are kept as text)
  std::string problem;                               // non-empty: the row is malformed (and fields may be empty)
  std::string problem_column;
};

// All rows of `path`. Throws ConfigError naming the file when it cannot be read or holds no rows.
std::vector<Row> read_rows(const std::string& path, RowFormat format);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool is_valid_utf8(const std::string& s);

}  // namespace hftrain
