// Row readers for JSON Lines, CSV / TSV and plain text (see text_rows.h).
#include "data/text_rows.h"

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

// Byte offset of the first malformed UTF-8 sequence, or -1.
int64_t first_bad_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    std::size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return static_cast<int64_t>(i);
    if (i + len > n) return static_cast<int64_t>(i);
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

void mark_bad_utf8(Row& row, const std::string& column, const std::string& value) {
  int64_t at = first_bad_utf8(value);
  if (at < 0 || !row.problem.empty()) return;
  row.problem = "invalid UTF-8 at byte " + std::to_string(at) + (column.empty() ? " of the line" : " of the value");
  row.problem_column = column;
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
      if (j.is_discarded()) {
        row.problem = "malformed JSON";
      } else if (!j.is_object()) {
        row.problem = "expected a JSON object, got " + std::string(j.type_name());
      } else {
        for (auto it = j.begin(); it != j.end(); ++it) {
          const auto& v = it.value();
          row.is_string[it.key()] = v.is_string();
          if (v.is_null()) row.fields[it.key()] = std::nullopt;
          else if (v.is_string()) row.fields[it.key()] = v.get<std::string>();
          else row.fields[it.key()] = v.dump();
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
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

}  // namespace

bool is_valid_utf8(const std::string& s) { return first_bad_utf8(s) < 0; }

std::vector<Row> read_rows(const std::string& path, RowFormat format) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const Error&) {
    throw ConfigError(path + ": cannot read the data file");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw ConfigError(path + ": the data file is empty");
  std::vector<Row> rows;
  switch (format) {
    case RowFormat::kJsonl: rows = read_jsonl(text); break;
    case RowFormat::kCsv: rows = read_csv(path, text, ','); break;
    case RowFormat::kTsv: rows = read_csv(path, text, '\t'); break;
    case RowFormat::kText: rows = read_text_lines(text); break;
  }
  if (rows.empty()) throw ConfigError(path + ": the data file has no rows");
  return rows;
}

}  // namespace hftrain
