// Character-level vocabulary built from a text, as nanoGPT's shakespeare_char prepare.py does: the
// sorted set of distinct characters (Unicode code points of the UTF-8 text) gets ids 0..V-1.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace hftrain {

class TextCharsTokenizer : public Tokenizer {
 public:
  // `source` names the text in errors (e.g. the file path). Invalid UTF-8 is a ConfigError with the byte offset.
  TextCharsTokenizer(const std::string& text, const std::string& source);
  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()); }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;

 private:
  std::string source_;
  std::vector<std::string> chars_;                 // id -> UTF-8 character
  std::unordered_map<std::string, int64_t> ids_;  // UTF-8 character -> id
};

}  // namespace hftrain
