// UTF-8 text as Python's str sees it (see text.h). Case mapping and categories come from utf8proc.
#include "jinja/text.h"

#include <utf8proc.h>

namespace hftrain::jinja {

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) len = 1;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool py_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

static utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool py_isprintable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool py_isalpha(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}
bool py_islower_char(char32_t cp) { return utf8proc_islower(static_cast<utf8proc_int32_t>(cp)); }
bool py_isupper_char(char32_t cp) { return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp)); }
bool py_isdigit(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_ND; }
char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }

static bool is_cased(char32_t cp) { return py_islower_char(cp) || py_isupper_char(cp) || category(cp) == UTF8PROC_CATEGORY_LT; }

std::string upper(std::string_view s) {
  std::string out;
  for (char32_t cp : decode_utf8(s)) {
    if (cp == 0xDF) out += "SS";  // Python's full case mapping of sharp s
    else append_utf8(out, to_upper(cp));
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  for (char32_t cp : decode_utf8(s)) append_utf8(out, to_lower(cp));
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t cp : decode_utf8(s)) {
    append_utf8(out, first ? static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))) : to_lower(cp));
    first = false;
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode_utf8(s)) {
    const bool cased = is_cased(cp);
    append_utf8(out, !cased ? cp : previous_cased ? to_lower(cp)
                                                  : static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))));
    previous_cased = cased;
  }
  return out;
}

static bool str_is_case(std::string_view s, bool want_lower) {
  bool any_cased = false;
  for (char32_t cp : decode_utf8(s)) {
    if (want_lower ? py_isupper_char(cp) || category(cp) == UTF8PROC_CATEGORY_LT
                   : py_islower_char(cp) || category(cp) == UTF8PROC_CATEGORY_LT)
      return false;
    if (is_cased(cp)) any_cased = true;
  }
  return any_cased;
}
bool str_islower(std::string_view s) { return str_is_case(s, true); }
bool str_isupper(std::string_view s) { return str_is_case(s, false); }

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const auto cps = decode_utf8(s);
  std::vector<char32_t> set;
  if (chars) set = decode_utf8(*chars);
  auto strip_it = [&](char32_t cp) {
    if (!chars) return py_isspace(cp);
    for (char32_t c : set)
      if (c == cp) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return encode_utf8(std::vector<char32_t>(cps.begin() + b, cps.begin() + e));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const auto cps = decode_utf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && py_isspace(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && py_isspace(cps[e - 1])) --e;
      out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + i, cps.begin() + e)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !py_isspace(cps[j])) ++j;
    out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
    i = j;
  }
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` before every code point and at the end
    int64_t done = 0;
    for (char32_t cp : decode_utf8(s)) {
      if (count < 0 || done < count) out += to, ++done;
      append_utf8(out, cp);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> lines;
  std::string line;
  const auto cps = decode_utf8(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 || c == 0x2029) {
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
      lines.push_back(std::move(line));
      line.clear();
    } else {
      append_utf8(line, c);
    }
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

static void append_escape(std::string& out, char32_t cp) {
  static const char* hex = "0123456789abcdef";
  const int digits = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
  out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
  for (int k = digits - 1; k >= 0; --k) out += hex[(cp >> (4 * k)) & 0xF];
}

std::string py_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decode_utf8(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && !py_isprintable(cp))) {
      append_escape(out, cp);
    } else {
      append_utf8(out, cp);
    }
  }
  out += quote;
  return out;
}

}  // namespace hftrain::jinja
