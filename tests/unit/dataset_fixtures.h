// Fixtures the data-source unit tests share (test_datasets.cpp, test_data_order.cpp): a letter tokenizer with BERT's
// special tokens that counts its encode_for_model calls, a FileDataSource's options over a scratch directory, and a
// string's bytes as ids.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "data/file_sources.h"
#include "tokenizers/tokenizer.h"

namespace hftrain_test {

inline std::vector<int64_t> bytes_of(const std::string& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// Letters a-z are ids 4..29; [PAD] 0, [CLS] 1, [SEP] 2, [MASK] 3. encode_for_model adds BERT's
// [CLS] A [SEP] (B [SEP]) with token types and a special-tokens mask; counts its calls.
class TinyTokenizer : public hftrain::Tokenizer {
 public:
  mutable std::atomic<int64_t> calls{0};
  int64_t vocab_size() const override { return 30; }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> ids;
    for (char c : text)
      if (c >= 'a' && c <= 'z') ids.push_back(c - 'a' + 4);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (auto id : ids) s += id >= 4 ? static_cast<char>('a' + id - 4) : '#';
    return s;
  }
  hftrain::Encoding encode_for_model(const std::string& text, const std::string* pair, int64_t max_length) const override {
    ++calls;
    std::vector<int64_t> a = encode(text), b = pair ? encode(*pair) : std::vector<int64_t>{};
    const std::size_t specials = pair ? 3 : 2;
    while (max_length > 0 && a.size() + b.size() + specials > static_cast<std::size_t>(max_length))
      (a.size() >= b.size() ? a : b).pop_back();
    hftrain::Encoding e;
    auto push = [&](int64_t id, int64_t type, int64_t special) {
      e.input_ids.push_back(id);
      e.token_type_ids.push_back(type);
      e.special_tokens_mask.push_back(special);
    };
    push(1, 0, 1);
    for (auto id : a) push(id, 0, 0);
    push(2, 0, 1);
    if (pair) {
      for (auto id : b) push(id, 1, 0);
      push(2, 1, 1);
    }
    return e;
  }
  hftrain::SpecialTokenIds special_tokens() const override {
    hftrain::SpecialTokenIds s;
    s.pad = 0;
    s.cls = 1;
    s.sep = 2;
    s.mask = 3;
    return s;
  }
};

inline hftrain::FileDataSource::Options base_options(const std::string& dir, const std::string& train) {
  hftrain::FileDataSource::Options o;
  o.train_file = dir + "/" + train;
  o.cache_dir = dir + "/cache";
  return o;
}

}  // namespace hftrain_test
