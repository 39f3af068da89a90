// tokenizer.json added tokens (see hf_added_tokens.h).
#include "tokenizers/hf_added_tokens.h"

#include <algorithm>

#include "tokenizers/unicode_text.h"

namespace hftrain::hf {
namespace {

namespace uni = hftrain::unicode;

bool is_word_char(char32_t c) { return uni::is_alphanumeric(c) || c == '_'; }

}  // namespace

void split_added(const std::string& text, const AddedMatcher& m, std::vector<Segment>& out) {
  if (m.empty) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  std::size_t last = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const AddedToken* t : m.by_byte[static_cast<unsigned char>(text[i])]) {
      if (text.compare(i, t->match.size(), t->match) != 0) continue;
      if (t->single_word) {
        std::size_t end = i + t->match.size();
        bool before = i > 0 && [&] {
          std::size_t k = i - 1;
          while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
          auto cps = uni::code_points(text.substr(k, i - k));
          return !cps.empty() && is_word_char(cps[0]);
        }();
        bool after = end < text.size() && [&] {
          auto cps = uni::code_points(text.substr(end, static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[end])))));
          return !cps.empty() && is_word_char(cps[0]);
        }();
        if (before || after) continue;
      }
      hit = t;
      break;
    }
    if (!hit) {
      i += static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[i])));
      continue;
    }
    std::size_t start = i, end = i + hit->match.size();
    if (hit->lstrip)  // whitespace before the token, not before the end of the previous match
      while (start > last) {
        std::size_t k = start - 1;
        while (k > last && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        auto cps = uni::code_points(text.substr(k, start - k));
        if (cps.size() != 1 || !uni::is_whitespace(cps[0])) break;
        start = k;
      }
    if (hit->rstrip)
      while (end < text.size()) {
        std::size_t n = static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[end])));
        auto cps = uni::code_points(text.substr(end, n));
        if (cps.size() != 1 || !uni::is_whitespace(cps[0])) break;
        end += n;
      }
    if (start > last) out.push_back({text.substr(last, start - last), -1});
    out.push_back({"", hit->id});
    last = i = end;
  }
  if (last < text.size()) out.push_back({text.substr(last), -1});
}

}  // namespace hftrain::hf
