// The Tokenizer default encode_for_model and the built-in character and byte tokenizers (see tokenizer.h).
#include "tokenizers/tokenizer.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {

void truncate_longest_first(std::vector<int64_t>& a, std::vector<int64_t>& b, bool is_pair, std::size_t limit) {
  if (!is_pair) {
    if (a.size() > limit) a.resize(limit);
    return;
  }
  if (a.size() + b.size() <= limit) return;
  std::size_t n1 = a.size(), n2 = b.size();
  const bool swap = n1 > n2;
  if (swap) std::swap(n1, n2);
  n2 = n1 > limit ? n1 : std::max(n1, limit - n1);
  if (n1 + n2 > limit) {
    n1 = limit / 2;
    n2 = n1 + limit % 2;
  }
  if (swap) std::swap(n1, n2);
  a.resize(std::min(a.size(), n1));
  b.resize(std::min(b.size(), n2));
}

std::string Tokenizer::decode_without_special(const std::vector<int64_t>& ids) const {
  const SpecialTokenIds s = special_tokens();
  std::vector<int64_t> kept;
  for (int64_t id : ids) {
    bool special = false;
    for (const auto& special_id : {s.bos, s.eos, s.pad, s.unk, s.cls, s.sep, s.mask}) special = special || id == special_id;
    if (!special) kept.push_back(id);
  }
  return decode(kept);
}

Encoding Tokenizer::encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const {
  std::vector<int64_t> a = encode(text), b = text_pair ? encode(*text_pair) : std::vector<int64_t>{};
  if (max_length > 0) truncate_longest_first(a, b, text_pair != nullptr, static_cast<std::size_t>(max_length));
  Encoding e;
  e.input_ids = a;
  e.input_ids.insert(e.input_ids.end(), b.begin(), b.end());
  e.token_type_ids.assign(a.size(), 0);
  e.token_type_ids.insert(e.token_type_ids.end(), b.size(), 1);
  e.special_tokens_mask.assign(e.input_ids.size(), 0);
  return e;
}

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
