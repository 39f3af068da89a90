// The PCRE2 regex of the pre-tokenizers (see unicode_text.h), with Oniguruma's classes: HF tokenizers runs
// tokenizer.json patterns on Oniguruma, whose \s, \p{L} and \p{N} differ from PCRE2's (U+180E is no \s there;
// letters and digits of newer Unicode versions are \p{L} / \p{N}). Those escapes are rewritten into explicit
// classes from unicode_tables before compiling. \p{L} / \p{N} keep PCRE2's fast property lookup and add the
// code points only Oniguruma has, measured once against the linked PCRE2; when PCRE2 has a code point that
// Oniguruma lacks (a newer PCRE2), the whole class is spelled out instead.
#include "tokenizers/unicode_text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <stdexcept>

#include "tokenizers/unicode_tables.h"

namespace hftrain::unicode {
namespace {

using tables::Range;
using tables::RangeTable;

bool is_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

std::string class_items(const std::vector<Range>& ranges) {
  std::string out;
  char buf[40];
  for (const auto& r : ranges) {
    if (r.first == r.last) std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(r.first));
    else std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", static_cast<unsigned>(r.first), static_cast<unsigned>(r.last));
    out += buf;
  }
  return out;
}

std::vector<Range> to_vector(RangeTable t) { return std::vector<Range>(t.data, t.data + t.size); }

// The code points (without surrogates) outside `ranges`.
std::vector<Range> complement(const std::vector<Range>& ranges) {
  std::vector<Range> out;
  char32_t next = 0;
  auto add = [&out](char32_t a, char32_t b) {
    if (a <= 0xD7FF || b >= 0xE000) {  // leave the surrogates out
      if (a < 0xD800 && b > 0xDFFF) {
        out.push_back({a, 0xD7FF});
        out.push_back({0xE000, b});
      } else if (a >= 0xD800 && a <= 0xDFFF) {
        out.push_back({0xE000, b});
      } else if (b >= 0xD800 && b <= 0xDFFF) {
        out.push_back({a, 0xD7FF});
      } else {
        out.push_back({a, b});
      }
    }
  };
  for (const auto& r : ranges) {
    if (r.first > next) add(next, r.first - 1);
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) add(next, 0x10FFFF);
  return out;
}

// Code points of `ranges` (surrogates left out) that PCRE2 pattern `native` matches, as ranges.
std::vector<Range> native_matches(const std::string& native, const std::vector<Range>& ranges) {
  std::string text;
  for (const auto& r : ranges)
    for (char32_t c = r.first; c <= r.last; ++c)
      if (!is_surrogate(c)) append_utf8(text, c);
  std::vector<Range> out;
  Regex re(native, false);
  for (auto [b, e] : re.find_all(text))
    for (char32_t c : code_points(text.substr(b, e - b))) {
      if (!out.empty() && out.back().last + 1 == c) out.back().last = c;
      else out.push_back({c, c});
    }
  return out;
}

// Items for a character class matching Oniguruma's \p{<name>} (`name` "L" or "N").
struct PropertyClass {
  std::string items;           // inside [...]
  std::string negated_items;   // inside [...], for \P{name}
};

PropertyClass make_property_class(const std::string& name, RangeTable table) {
  auto onig = to_vector(table);
  auto outside = complement(onig);
  PropertyClass pc;
  if (native_matches("\\p{" + name + "}", outside).empty()) {
    // PCRE2's set is inside Oniguruma's: PCRE2's property plus what only Oniguruma has.
    auto extra = class_items(native_matches("[^\\p{" + name + "}]", onig));
    pc.items = "\\p{" + name + "}" + extra;
  } else {
    pc.items = class_items(onig);
  }
  pc.negated_items = class_items(outside);
  return pc;
}

const PropertyClass& letter_class() {
  static const PropertyClass pc = make_property_class("L", tables::regex_letter());
  return pc;
}
const PropertyClass& number_class() {
  static const PropertyClass pc = make_property_class("N", tables::regex_number());
  return pc;
}
const PropertyClass& space_class() {
  static const PropertyClass pc = [] {
    auto s = to_vector(tables::regex_space());
    return PropertyClass{class_items(s), class_items(complement(s))};
  }();
  return pc;
}

// The class an escape at pattern[i] ('\\' at i) stands for, and the escape's length; nullptr when it is not
// one of \s \S \p{L} \P{L} \p{N} \P{N} (also \pL, \p{^L} and the like).
const PropertyClass* escape_class(const std::string& p, std::size_t i, std::size_t& length, bool& negated) {
  if (i + 1 >= p.size()) return nullptr;
  char k = p[i + 1];
  if (k == 's' || k == 'S') {
    length = 2;
    negated = k == 'S';
    return &space_class();
  }
  if (k != 'p' && k != 'P') return nullptr;
  negated = k == 'P';
  std::string name;
  if (i + 2 < p.size() && p[i + 2] == '{') {
    auto close = p.find('}', i + 3);
    if (close == std::string::npos) return nullptr;
    name = p.substr(i + 3, close - i - 3);
    length = close - i + 1;
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
  } else if (i + 2 < p.size()) {
    name = p.substr(i + 2, 1);
    length = 3;
  }
  if (name == "L") return &letter_class();
  if (name == "N") return &number_class();
  return nullptr;
}

}  // namespace

std::string with_oniguruma_classes(const std::string& p) {
  std::string out;
  bool in_class = false;
  std::size_t i = 0;
  while (i < p.size()) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      if (p[i + 1] == 'Q') {  // \Q...\E quotes literally
        auto end = p.find("\\E", i + 2);
        std::size_t stop = end == std::string::npos ? p.size() : end + 2;
        out.append(p, i, stop - i);
        i = stop;
        continue;
      }
      std::size_t length = 0;
      bool negated = false;
      if (const PropertyClass* pc = escape_class(p, i, length, negated)) {
        const std::string& items = negated ? pc->negated_items : pc->items;
        out += in_class ? items : "[" + items + "]";
        i += length;
        continue;
      }
      out.append(p, i, 2);
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:] inside a class
      auto end = p.find(":]", i + 2);
      std::size_t stop = end == std::string::npos ? i + 1 : end + 2;
      out.append(p, i, stop - i);
      i = stop;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

namespace {

pcre2_code* compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                             &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw std::runtime_error("regex '" + pattern + "' does not compile at offset " + std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(message));
  }
  return code;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool oniguruma_classes) {
  auto* code = compile(pattern);  // errors name the offset in the pattern as written
  if (oniguruma_classes) {
    std::string rewritten = with_oniguruma_classes(pattern);
    if (rewritten != pattern) {
      pcre2_code_free(code);
      code = compile(rewritten);
    }
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is used if JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(const std::string& text) const {
  auto* code = static_cast<pcre2_code*>(code_);
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  std::size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the JIT's small stack: the interpreter (heap-backed) handles it
      rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw std::runtime_error("regex match failed at byte " + std::to_string(start) + ": " +
                               reinterpret_cast<const char*>(message));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    std::size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: not a token; step over one character
      if (b >= text.size()) break;
      start = b + static_cast<std::size_t>(utf8_length(static_cast<unsigned char>(text[b])));
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace hftrain::unicode
