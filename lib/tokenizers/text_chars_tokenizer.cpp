// Character-level vocabulary of a text (see text_chars_tokenizer.h).
#include "tokenizers/text_chars_tokenizer.h"

#include <set>

#include "util/error.h"

namespace hftrain {
namespace {

// Length of the UTF-8 sequence starting at text[i], or 0 when it is not valid UTF-8.
std::size_t utf8_length(const std::string& text, std::size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return 0;
  return n;
}

template <typename Fn>
void for_each_char(const std::string& text, const std::string& source, Fn fn) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) throw ConfigError(source + ": invalid UTF-8 at byte offset " + std::to_string(i));
    fn(text.substr(i, n));
    i += n;
  }
}

}  // namespace

TextCharsTokenizer::TextCharsTokenizer(const std::string& text, const std::string& source) : source_(source) {
  std::set<std::string> distinct;
  for_each_char(text, source, [&](std::string c) { distinct.insert(std::move(c)); });
  // Sorted by code point: for valid UTF-8, byte-wise order of the encodings is code point order.
  chars_.assign(distinct.begin(), distinct.end());
  for (std::size_t i = 0; i < chars_.size(); ++i) ids_[chars_[i]] = static_cast<int64_t>(i);
}

std::vector<int64_t> TextCharsTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for_each_char(text, "text to encode", [&](const std::string& c) {
    auto it = ids_.find(c);
    if (it == ids_.end())
      throw ConfigError("character '" + c + "' is not in the character vocabulary of " + source_);
    ids.push_back(it->second);
  });
  return ids;
}

std::string TextCharsTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (auto id : ids) s += (id >= 0 && id < vocab_size()) ? chars_[static_cast<std::size_t>(id)] : "?";
  return s;
}

}  // namespace hftrain
