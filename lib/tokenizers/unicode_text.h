// UTF-8 and Unicode helpers for the tokenizers: code point iteration, categories (utf8proc), the classes HF
// tokenizers uses (unicode_tables.h: BERT's control / punctuation, combining marks, Rust's lowercase, grapheme
// clusters), NFD/NFC/NFKD/NFKC, the byte-level BPE byte<->character table, and a PCRE2 regex wrapper with
// Oniguruma's \s \p{L} \p{N}.
// Remaining differences from HF tokenizers: docs/tokenizers.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hftrain::unicode {

// Valid UTF-8: every malformed byte becomes U+FFFD.
std::string sanitize_utf8(const std::string& s);
// Code points of valid UTF-8 text (see sanitize_utf8).
std::vector<char32_t> code_points(const std::string& s);
void append_utf8(std::string& out, char32_t cp);
std::string to_utf8(char32_t cp);
// Byte length of the UTF-8 sequence starting with `lead` (1 for malformed lead bytes).
int utf8_length(unsigned char lead);

bool is_whitespace(char32_t cp);    // Unicode White_Space (Rust char::is_whitespace)
bool is_letter(char32_t cp);        // L*
bool is_number(char32_t cp);        // N*
bool is_punctuation(char32_t cp);   // P*
bool is_other(char32_t cp);         // C* (Cc, Cf, Cs, Co, Cn)
bool is_nonspacing_mark(char32_t cp);  // Mn
bool is_alphanumeric(char32_t cp);  // L* or N*
bool is_bert_control(char32_t cp);      // dropped by BertNormalizer clean_text (HF's table; not \t \n \r)
bool is_bert_punctuation(char32_t cp);  // BertPreTokenizer / Punctuation (HF's table)
bool is_combining_mark(char32_t cp);    // removed by StripAccents (HF's table: Mn, Mc, Me)
bool is_bert_nonspacing_mark(char32_t cp);  // removed by BertNormalizer strip_accents (HF's table: old Mn)

// Whether an extended grapheme cluster ends between `prev` and `c`, as HF's unicode-segmentation cuts text
// (the Precompiled normalizer's clusters): utf8proc's rules, with each code point whose grapheme-break class HF
// has otherwise (unicode_tables.h grapheme_*: marks and a Prepend letter assigned after utf8proc's Unicode
// 15.0, U+11A3A no longer Prepend, unassigned default-ignorables as Control) given to them as a stand-in of
// HF's class. `state` is 0 at the start of a text and carried from one call to the next.
bool grapheme_break(char32_t prev, char32_t c, int32_t& state);

// Rust's char::to_lowercase as HF tokenizers has it (full mappings: U+0130 -> "i\u0307").
std::string lowercase(const std::string& s);
// form: "NFD", "NFC", "NFKD", "NFKC"; the code points HF's tables do not decompose are kept as they are.
std::string normalize(const std::string& s, const std::string& form);

// GPT-2's byte -> printable character table (byte-level BPE) and its inverse.
const std::vector<char32_t>& bytes_to_chars();
// -1 where the character is not one of the 256 table characters.
int char_to_byte(char32_t cp);

// `pattern` with \s \S \p{L} \P{L} \p{N} \P{N} (also inside [...]) spelled as the classes Oniguruma (HF's
// regex engine) gives them; other escapes are left to PCRE2.
std::string with_oniguruma_classes(const std::string& pattern);

// A compiled PCRE2 pattern (UTF, Unicode properties). Thread-safe for matching.
class Regex {
 public:
  // Throws std::runtime_error with PCRE2's message and offset when the pattern does not compile.
  // oniguruma_classes: compile with_oniguruma_classes(pattern).
  explicit Regex(const std::string& pattern, bool oniguruma_classes = true);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Byte ranges [begin, end) of all non-overlapping matches in valid UTF-8 `text`, left to right.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(const std::string& text) const;

 private:
  void* code_ = nullptr;
};

}  // namespace hftrain::unicode
