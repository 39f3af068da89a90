// Built-in character and byte tokenizers (see dataset.h).
#include "data/dataset.h"

#include "util/error.h"

namespace hftrain {

std::vector<int64_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (char c : text) {
    auto pos = alphabet_.find(c);
    if (pos == std::string::npos) throw RuntimeFailure(std::string("character '") + c + "' is not in the vocabulary");
    ids.push_back(static_cast<int64_t>(pos));
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (auto id : ids) s += (id >= 0 && id < vocab_size()) ? alphabet_[static_cast<std::size_t>(id)] : '?';
  return s;
}

std::vector<int64_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (auto id : ids) s += static_cast<char>(id & 0xff);
  return s;
}

}  // namespace hftrain
