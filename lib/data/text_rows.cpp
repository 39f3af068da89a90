// Row readers for JSON (Lines or one array), CSV / TSV and plain text, and the file-level checks (see text_rows.h).
#include "data/text_rows.h"

#include "data/data_files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "util/error.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/utf8.h"

namespace hftrain {
namespace {

void mark_bad_utf8(Row& row, const std::string& column, const std::string& value) {
  int64_t at = first_bad_utf8(value);
  if (at < 0 || !row.problem.empty()) return;
  row.problem = "invalid UTF-8 at byte " + std::to_string(at) + (column.empty() ? " of the line" : " of the value");
  row.problem_column = column;
}

// A JSON value as a row: an object's fields (strings as they are, null as nullopt, anything else as its JSON
// text), or the problem of a value that is no object.
void fill_row(const nlohmann::json& j, Row& row) {
  if (!j.is_object()) {
    row.problem = "expected a JSON object, got " + std::string(j.type_name());
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    row.is_string[it.key()] = v.is_string();
    if (v.is_null()) row.fields[it.key()] = std::nullopt;
    else if (v.is_string()) row.fields[it.key()] = v.get<std::string>();
    else row.fields[it.key()] = v.dump();
  }
}

std::vector<Row> read_jsonl(const std::string& text) {
  std::vector<Row> rows;
  int64_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no row
    Row row;
    row.line = line_no;
    mark_bad_utf8(row, "", line);
    if (row.problem.empty()) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) row.problem = "malformed JSON";
      else fill_row(j, row);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t line_at(const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// Where the JSON text begins: after a UTF-8 byte-order mark and whitespace.
std::size_t json_start(const std::string& text) {
  std::size_t at = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  at = text.find_first_not_of(" \t\r\n", at);
  return at == std::string::npos ? text.size() : at;
}

// The byte offsets where the elements of a well-formed top-level JSON array start.
std::vector<std::size_t> element_offsets(const std::string& text) {
  std::vector<std::size_t> offsets;
  int depth = 0;
  bool in_string = false, escaped = false, expect = false;
  for (std::size_t i = json_start(text); i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (depth == 1 && expect && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ']') {
      offsets.push_back(i);
      expect = false;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') expect = ++depth == 1;
    else if (c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 1) expect = true;
  }
  return offsets;
}

// nlohmann's parse error without its id and position ("syntax error while parsing ...").
std::string parse_reason(const nlohmann::json::parse_error& e) {
  std::string w = e.what();
  std::size_t k = w.find("] ");
  if (k != std::string::npos) w = w.substr(k + 2);
  k = w.find(": ");
  if (w.rfind("parse error", 0) == 0 && k != std::string::npos) w = w.substr(k + 2);
  return w;
}

// A file that is one JSON array (datasets' json loader reads it as rows): one row per element, each
// knowing its element index and the line it starts on.
std::vector<Row> read_json_array(const std::string& path, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path + ":" + std::to_string(line_at(text, e.byte > 0 ? e.byte - 1 : 0)) +
                      ": malformed JSON array: " + parse_reason(e));
  }
  const std::vector<std::size_t> offsets = element_offsets(text);
  std::vector<Row> rows(j.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].element = static_cast<int64_t>(i);
    rows[i].line = i < offsets.size() ? line_at(text, offsets[i]) : 1;
    fill_row(j[i], rows[i]);
  }
  return rows;
}

// JSON rows: a JSON array file, or JSON Lines. A text that starts with '[' is an array unless its first line
// is a JSON value by itself and more lines follow (then it is JSON Lines whose first row is no object). One
// JSON object spread over lines is neither, and is named as what it is.
std::vector<Row> read_json_rows(const std::string& path, const std::string& text) {
  const std::size_t at = json_start(text);
  std::size_t eol = text.find('\n', at);
  const std::string first_line = text.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
  const bool one_line = eol == std::string::npos || text.find_first_not_of(" \t\r\n", eol) == std::string::npos;
  if (at < text.size() && text[at] == '[') {
    if (one_line || !nlohmann::json::accept(first_line)) return read_json_array(path, text);
  } else if (at < text.size() && text[at] == '{' && !one_line) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_object()) {
      const int64_t lines = line_at(text, text.find_last_not_of(" \t\r\n"));
      std::string msg = path + ": the file is one JSON object over " + std::to_string(lines) +
                        " lines, neither JSON Lines (one object per line) nor a JSON array of objects";
      for (auto it = j.begin(); it != j.end(); ++it)
        if (it.value().is_array() && !it.value().empty() && it.value().front().is_object()) {
          msg += "; its key '" + it.key() + "' holds a list of " + std::to_string(it.value().size()) +
                 " objects, and reading the rows under a key (datasets' field=) is not supported yet: write that "
                 "list alone as a JSON array or as JSON Lines";
          break;
        }
      throw ConfigError(msg);
    }
  }
  return read_jsonl(text);
}

// What a binary data file is, by its magic bytes; "" for none known. These are never rows of a text format
// (parquet and Arrow files are read before: columnar_format).
std::string binary_format(const std::string& text) {
  auto starts = [&](const char* magic, std::size_t n) { return text.size() >= n && text.compare(0, n, magic, n) == 0; };
  const bool binary_head = first_bad_utf8(text.substr(0, 4096)) >= 0 || text.find('\0') < 4096;
  if (starts("\x1F\x8B", 2)) return "gzip-compressed (1F 8B magic): compressed files are not read yet; decompress it first";
  if (starts("\x28\xB5\x2F\xFD", 4)) return "zstd-compressed: compressed files are not read yet; decompress it first";
  if (starts("\xFD" "7zXZ" "\0", 6)) return "xz-compressed: compressed files are not read yet; decompress it first";
  if (starts("PK\x03\x04", 4) && binary_head) return "a zip archive: archives are not read yet; extract the data file first";
  return "";
}

// One CSV record starting at `pos`; advances pos and the line counter. RFC 4180 quoting.
std::vector<std::string> csv_record(const std::string& text, std::size_t& pos, int64_t& line, char delimiter,
                                    bool& unterminated) {
  std::vector<std::string> fields(1);
  bool quoted = false, was_quoted = false;
  unterminated = false;
  while (pos < text.size()) {
    char c = text[pos];
    if (quoted) {
      if (c == '"') {
        if (pos + 1 < text.size() && text[pos + 1] == '"') {
          fields.back() += '"';
          pos += 2;
          continue;
        }
        quoted = false;
        ++pos;
        continue;
      }
      if (c == '\n') ++line;
      fields.back() += c;
      ++pos;
      continue;
    }
    if (c == '"' && fields.back().empty() && !was_quoted) {
      quoted = was_quoted = true;
      ++pos;
      continue;
    }
    if (c == delimiter) {
      fields.emplace_back();
      was_quoted = false;
      ++pos;
      continue;
    }
    if (c == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') { ++pos; continue; }
    if (c == '\n') {
      ++pos;
      ++line;
      return fields;
    }
    fields.back() += c;
    ++pos;
  }
  unterminated = quoted;
  ++line;
  return fields;
}

std::vector<Row> read_csv(const std::string& path, const std::string& text, char delimiter) {
  std::size_t pos = 0;
  int64_t line = 1;
  bool unterminated = false;
  // Header: the first non-blank record.
  std::vector<std::string> header;
  while (pos < text.size() && header.empty()) {
    std::vector<std::string> rec = csv_record(text, pos, line, delimiter, unterminated);
    if (rec.size() == 1 && rec[0].empty()) continue;
    header = rec;
  }
  if (header.empty()) throw ConfigError(path + ": the file has no header row");
  for (const auto& h : header)
    if (first_bad_utf8(h) >= 0) throw ConfigError(path + ": the header row is not valid UTF-8");
  std::vector<Row> rows;
  while (pos < text.size()) {
    Row row;
    row.line = line;
    std::vector<std::string> rec = csv_record(text, pos, line, delimiter, unterminated);
    if (rec.size() == 1 && rec[0].empty()) continue;  // blank line (pandas skip_blank_lines)
    if (unterminated) {
      row.problem = "unterminated quoted field";
    } else if (rec.size() != header.size()) {
      row.problem = "expected " + std::to_string(header.size()) + " fields (the header's), got " + std::to_string(rec.size());
    } else {
      for (std::size_t k = 0; k < header.size(); ++k) {
        mark_bad_utf8(row, header[k], rec[k]);
        row.fields[header[k]] = rec[k];
        row.is_string[header[k]] = true;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Row> read_text_lines(const std::string& text) {
  std::vector<Row> rows;
  std::size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    Row row;
    row.line = ++line_no;
    mark_bad_utf8(row, "text", line);
    row.fields["text"] = line;
    row.is_string["text"] = true;
    rows.push_back(std::move(row));
  }
  return rows;
}

// Whether `path` is read as parquet (1) or Arrow (2), else 0: by the data type, the name, then the magic bytes.
int columnar_format(const std::string& path, RowFormat format) {
  if (format == RowFormat::kParquet || ends_with(path, ".parquet")) return 1;
  if (format == RowFormat::kArrow || ends_with(path, ".arrow")) return 2;
  char head[8] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof head);
  const auto n = static_cast<std::size_t>(in.gcount());
  if (n >= 4 && std::string(head, 4) == "PAR1") return 1;
  if ((n >= 6 && std::string(head, 6) == "ARROW1") || (n >= 4 && std::string(head, 4) == "\xFF\xFF\xFF\xFF")) return 2;
  return 0;
}

}  // namespace

bool is_valid_utf8(const std::string& s) { return first_bad_utf8(s) < 0; }

std::string row_location(const std::string& path, const Row& row) {
  const std::string& file = row.file.empty() ? path : row.file;
  if (row.line == 0 && row.element >= 0) return file + " (row " + std::to_string(row.element) + ")";
  std::string where = file + ":" + std::to_string(row.line);
  if (row.element >= 0) where += " (element " + std::to_string(row.element) + ")";
  return where;
}

std::vector<Row> read_rows(const std::string& path, RowFormat format) {
  if (const int columnar = columnar_format(path, format)) {
    const bool by_content = format != RowFormat::kParquet && format != RowFormat::kArrow && !ends_with(path, ".parquet") &&
                            !ends_with(path, ".arrow");
    try {
      return read_columnar_rows(path, columnar == 2);
    } catch (const ConfigError& e) {
      if (!by_content) throw;
      throw ConfigError(std::string(e.what()) + " (read as " + (columnar == 1 ? "a parquet" : "an Arrow") +
                        " file: its first bytes are that format's magic)");
    }
  }
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const Error&) {
    throw ConfigError(path + ": cannot read the data file");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw ConfigError(path + ": the data file is empty");
  const std::string binary = binary_format(text);
  if (!binary.empty()) throw ConfigError(path + ": this looks like " + binary);
  std::vector<Row> rows;
  switch (format) {
    case RowFormat::kJsonl: rows = read_json_rows(path, text); break;
    case RowFormat::kCsv: rows = read_csv(path, text, ','); break;
    case RowFormat::kTsv: rows = read_csv(path, text, '\t'); break;
    case RowFormat::kText: rows = read_text_lines(text); break;
    case RowFormat::kParquet:
    case RowFormat::kArrow: break;  // read above
  }
  if (rows.empty()) throw ConfigError(path + ": the data file has no rows");
  return rows;
}

}  // namespace hftrain
