// The WordPiece (greedy longest-match-first with "##" continuations, BERT) and WordLevel (whole words) models of
// tokenizer.json.
#include "tokenizers/hf_models.h"

#include "util/error.h"

namespace hftrain::hf {

std::vector<int64_t> WordPieceModel::tokenize_word(const std::string& word) const {
  auto cps = uni::code_points(word);
  std::vector<int64_t> out;
  bool bad = cps.size() > max_chars;
  // Byte offsets of the code points, to take substrings at character boundaries.
  std::vector<std::size_t> offs(cps.size() + 1, 0);
  for (std::size_t i = 0; i < cps.size(); ++i) offs[i + 1] = offs[i] + uni::to_utf8(cps[i]).size();
  std::size_t start = 0;
  while (!bad && start < cps.size()) {
    std::size_t end = cps.size();
    std::optional<int64_t> found;
    while (start < end) {
      std::string sub = word.substr(offs[start], offs[end] - offs[start]);
      if (start > 0) sub = prefix + sub;
      if ((found = find(sub))) break;
      --end;
    }
    if (!found) bad = true;
    else out.push_back(*found);
    start = end;
  }
  if (bad) {
    auto unk = find(unk_token);
    if (!unk) throw RuntimeFailure("WordPiece: the unk_token \"" + unk_token + "\" is not in the vocabulary");
    return {*unk};
  }
  return out;
}

std::unique_ptr<WordPieceModel> WordPieceModel::parse(const Json& j) {
  auto m = std::make_unique<WordPieceModel>();
  m->set_vocab(j.at("vocab"));
  m->unk_token = get_string(j, "unk_token", m->unk_token);
  m->prefix = get_string(j, "continuing_subword_prefix", m->prefix);
  if (j.contains("max_input_chars_per_word")) m->max_chars = j.at("max_input_chars_per_word").get<std::size_t>();
  return m;
}

std::vector<int64_t> WordLevelModel::tokenize_word(const std::string& word) const {
  if (auto id = find(word)) return {*id};
  if (auto unk = find(unk_token)) return {*unk};
  throw RuntimeFailure("WordLevel: \"" + word + "\" and the unk_token \"" + unk_token + "\" are not in the vocabulary");
}

std::unique_ptr<WordLevelModel> WordLevelModel::parse(const Json& j) {
  auto m = std::make_unique<WordLevelModel>();
  m->set_vocab(j.at("vocab"));
  m->unk_token = get_string(j, "unk_token", m->unk_token);
  return m;
}

}  // namespace hftrain::hf
