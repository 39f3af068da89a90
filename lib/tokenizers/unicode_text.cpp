// UTF-8 / Unicode helpers backed by utf8proc and HF tokenizers' tables (see unicode_text.h).
#include "tokenizers/unicode_text.h"

#include "tokenizers/unicode_tables.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace hftrain::unicode {

int utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

void append_utf8(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

std::string to_utf8(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

std::string sanitize_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    if (p[i] < 0x80) {
      out.push_back(static_cast<char>(p[i]));
      ++i;
      continue;
    }
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      append_utf8(out, 0xFFFD);
      ++i;
    } else {
      out.append(s, i, static_cast<std::size_t>(n));
      i += static_cast<std::size_t>(n);
    }
  }
  return out;
}

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      cps.push_back(0xFFFD);
      ++i;
    } else {
      cps.push_back(static_cast<char32_t>(cp));
      i += static_cast<std::size_t>(n);
    }
  }
  return cps;
}

static utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_letter(char32_t c) {
  auto k = category(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
bool is_number(char32_t c) {
  auto k = category(c);
  return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}
bool is_punctuation(char32_t c) {
  auto k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}
bool is_other(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_CN || (k >= UTF8PROC_CATEGORY_CC && k <= UTF8PROC_CATEGORY_CO);
}
bool is_nonspacing_mark(char32_t c) { return category(c) == UTF8PROC_CATEGORY_MN; }
bool is_alphanumeric(char32_t c) { return is_letter(c) || is_number(c); }
bool is_bert_control(char32_t c) { return tables::bert_control().contains(c); }
bool is_bert_punctuation(char32_t c) { return tables::bert_punctuation().contains(c); }
bool is_combining_mark(char32_t c) { return tables::combining_mark().contains(c); }
bool is_bert_nonspacing_mark(char32_t c) { return tables::bert_nonspacing_mark().contains(c); }

// Appends the lowercase of `c` (HF's table: runs of one-to-one mappings and the few longer ones).
static void append_lower(std::string& out, char32_t c) {
  static const tables::LowerTable t = tables::lowercase();
  for (std::size_t i = 0; i < t.n_multi; ++i)
    if (t.multi[i].cp == c) {
      for (char32_t l : t.multi[i].lower) append_utf8(out, l);
      return;
    }
  const tables::LowerRun* end = t.runs + t.n_runs;
  const tables::LowerRun* it =
      std::upper_bound(t.runs, end, c, [](char32_t v, const tables::LowerRun& r) { return v < r.first; });
  if (it != t.runs) {
    const auto& r = *(it - 1);
    if (c <= r.last && (c - r.first) % r.stride == 0) c = static_cast<char32_t>(static_cast<int32_t>(c) + r.delta);
  }
  append_utf8(out, c);
}

static bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

namespace {

// What the grapheme tables tell apart, for one code point: it joins the character before it, it joins the
// character after it, a mark after it does not join it.
struct GraphemeFacts {
  bool joins_previous = false, joins_next = false, control = false;
  bool same(const GraphemeFacts& o) const {
    return joins_previous == o.joins_previous && joins_next == o.joins_next && control == o.control;
  }
};

bool utf8proc_joins(char32_t a, char32_t b) {
  utf8proc_int32_t state = 0;
  return !utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b), &state);
}

// utf8proc's facts, found as the tables' were measured.
GraphemeFacts utf8proc_facts(char32_t c) {
  return {utf8proc_joins('a', c), c >= 0x80 && utf8proc_joins(c, 'a'), c >= 0x80 && !utf8proc_joins(c, 0x300)};
}

// HF's facts; where the tables measured nothing (ASCII, a mark after a code point above the BMP), utf8proc's.
GraphemeFacts hf_facts(char32_t c, const GraphemeFacts& fallback) {
  GraphemeFacts f = fallback;
  f.joins_previous = tables::grapheme_extend().contains(c);
  if (c >= 0x80) f.joins_next = tables::grapheme_prepend().contains(c);
  if (c >= 0x80 && c < 0x10000) f.control = tables::grapheme_control().contains(c);
  return f;
}

// Code point -> the stand-in utf8proc is given (U+0300 Extend, U+0600 Prepend, U+0001 Control, 'a' Other)
// for every code point whose facts differ, sorted. Built once from the code points either side classes as
// something other than Other.
const std::vector<std::pair<char32_t, char32_t>>& grapheme_stand_ins() {
  static const std::vector<std::pair<char32_t, char32_t>> stand_ins = [] {
    std::vector<char32_t> candidates;
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      const auto cls = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->boundclass;
      if (cls != UTF8PROC_BOUNDCLASS_OTHER && cls != UTF8PROC_BOUNDCLASS_EXTENDED_PICTOGRAPHIC) candidates.push_back(c);
    }
    for (const tables::RangeTable& t : {tables::grapheme_extend(), tables::grapheme_prepend(), tables::grapheme_control()})
      for (std::size_t i = 0; i < t.size; ++i)
        for (char32_t c = t.data[i].first; c <= t.data[i].last; ++c) candidates.push_back(c);
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    std::vector<std::pair<char32_t, char32_t>> out;
    for (char32_t c : candidates) {
      const GraphemeFacts u = utf8proc_facts(c), h = hf_facts(c, u);
      if (!h.same(u)) out.emplace_back(c, h.joins_previous ? 0x300 : h.joins_next ? 0x600 : h.control ? 0x1 : 'a');
    }
    return out;
  }();
  return stand_ins;
}

char32_t grapheme_stand_in(char32_t c) {
  const auto& v = grapheme_stand_ins();
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(c, char32_t{0}));
  return it != v.end() && it->first == c ? it->second : c;
}

}  // namespace

bool grapheme_break(char32_t prev, char32_t c, int32_t& state) {
  utf8proc_int32_t s = state;
  const bool brk = utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(grapheme_stand_in(prev)),
                                                     static_cast<utf8proc_int32_t>(grapheme_stand_in(c)), &s);
  state = s;
  return brk;
}

std::string lowercase(const std::string& s) {
  if (is_ascii(s)) {
    std::string out = s;
    for (auto& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t c : code_points(s)) append_lower(out, c);
  return out;
}

static std::string utf8proc_normalize(const std::string& s, int options) {
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                        &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) return s;  // malformed input: callers pass sanitized text, so this is not expected
  std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return result;
}

std::string normalize(const std::string& s, const std::string& form) {
  int options = UTF8PROC_STABLE;
  if (form == "NFD") options |= UTF8PROC_DECOMPOSE;
  else if (form == "NFC") options |= UTF8PROC_COMPOSE;
  else if (form == "NFKD") options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  else if (form == "NFKC") options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  else throw std::invalid_argument("unknown normalization form " + form);
  if (is_ascii(s)) return s;  // ASCII is invariant under all four forms
  // The code points HF's tables do not decompose stay as they are: normalize the text between them.
  static const tables::CodePointList kept = tables::nfd_kept();
  auto cps = code_points(s);
  if (std::none_of(cps.begin(), cps.end(), [](char32_t c) { return kept.contains(c); })) return utf8proc_normalize(s, options);
  std::string out, segment;
  for (char32_t c : cps) {
    if (kept.contains(c)) {
      out += utf8proc_normalize(segment, options);
      segment.clear();
      append_utf8(out, c);
    } else {
      append_utf8(segment, c);
    }
  }
  return out + utf8proc_normalize(segment, options);
}

const std::vector<char32_t>& bytes_to_chars() {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256, 0);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(char32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(512, -1);
    const auto& t = bytes_to_chars();
    for (int b = 0; b < 256; ++b) inv[t[static_cast<std::size_t>(b)]] = b;
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

}  // namespace hftrain::unicode
