// Reading tabular text files into rows of named string fields: JSON (one object per line, or a file that is
// one JSON array of objects, as datasets' json loader reads both), CSV / TSV (RFC 4180 quoting, header row)
// and plain text (one row per line, column "text", as HF's `text` loader). Free of LibTorch. Problems in a
// row are kept on the row (line, column, reason) so the caller decides between an error and skip-and-count;
// problems with a whole file (unreadable, empty, a compressed or archive file) throw ConfigError. Parquet and
// Arrow IPC files (by the data type, their name's .parquet / .arrow, or their magic bytes) are read through
// lib/columnar (data/data_files.h), one row per record.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hftrain {

enum class RowFormat { kJsonl, kCsv, kTsv, kText, kParquet, kArrow };

struct Row {
  int64_t line = 0;                                   // 1-based line where the row starts
  int64_t element = -1;                               // JSON array files: the 0-based index of the element;
                                                      // parquet / Arrow files (line 0): the 0-based row
  std::string file;                                   // set when the row's split has several files
  std::map<std::string, std::optional<std::string>> fields;  // nullopt = JSON null
  std::map<std::string, bool> is_string;             // JSON: the value was a string (numbers are kept as text)
  std::string problem;                               // non-empty: the row is malformed (and fields may be empty)
  std::string problem_column;
};

// All rows of `path`. Throws ConfigError naming the file when it cannot be read, holds no rows or is not a
// file of the format (a compressed file or archive; with kJsonl also a malformed JSON array and a single JSON
// object spread over lines; a parquet or Arrow file that is corrupt or holds a type not read).
std::vector<Row> read_rows(const std::string& path, RowFormat format);

// Where a row is, for messages: "path:line", and " (element i)" for an element of a JSON array file;
// "path (row i)" for a parquet / Arrow row. The row's own file replaces `path` when it has one.
std::string row_location(const std::string& path, const Row& row);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool is_valid_utf8(const std::string& s);

}  // namespace hftrain
