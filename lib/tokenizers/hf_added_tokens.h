// tokenizer.json "added_tokens": tokens matched in the raw (or normalized) text before the model runs, with
// single_word, lstrip and rstrip as HF tokenizers' AddedVocabulary.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace hftrain::hf {

struct AddedToken {
  int64_t id = 0;
  std::string content, match;  // match: content, normalized when `normalized`
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Leftmost-longest matcher over a set of added tokens, bucketed by first byte.
struct AddedMatcher {
  std::vector<const AddedToken*> by_byte[256];
  bool empty = true;
  void add(const AddedToken* t) {
    if (t->match.empty()) return;
    auto& v = by_byte[static_cast<unsigned char>(t->match[0])];
    v.push_back(t);
    std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->match.size() > b->match.size(); });
    empty = false;
  }
};

// A segment of the input: text still to tokenize (id < 0) or an added token's id.
struct Segment {
  std::string text;
  int64_t id = -1;
};

// Splits `text` at the leftmost-longest matches of `m`, appending the pieces to `out`.
void split_added(const std::string& text, const AddedMatcher& m, std::vector<Segment>& out);

}  // namespace hftrain::hf
