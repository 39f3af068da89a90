// The BPE model of tokenizer.json: characters (or their bytes, byte_fallback) of a word merged by merge rank, with
// continuing_subword_prefix / end_of_word_suffix, unk / fuse_unk and ignore_merges as HF tokenizers does.
#include <cstdio>

#include "tokenizers/hf_models.h"

namespace hftrain::hf {

std::vector<int64_t> BpeModel::tokenize_word(const std::string& word) const {
  if (ignore_merges)
    if (auto id = find(word)) return {*id};
  std::vector<int64_t> sym;
  std::vector<bool> mergeable;  // false for unk symbols, which never merge
  auto cps = uni::code_points(word);
  for (std::size_t i = 0; i < cps.size(); ++i) {
    std::string c = uni::to_utf8(cps[i]);
    if (i > 0) c = prefix + c;
    if (i + 1 == cps.size()) c += suffix;
    if (auto id = find(c)) {
      sym.push_back(*id);
      mergeable.push_back(true);
      continue;
    }
    if (byte_fallback) {
      std::vector<int64_t> bytes;
      for (unsigned char b : uni::to_utf8(cps[i])) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        if (auto id = find(name)) bytes.push_back(*id);
        else break;
      }
      if (bytes.size() == uni::to_utf8(cps[i]).size()) {
        for (auto id : bytes) {
          sym.push_back(id);
          mergeable.push_back(true);
        }
        continue;
      }
    }
    if (unk) {
      if (fuse_unk && !sym.empty() && !mergeable.back() && sym.back() == *unk) continue;
      sym.push_back(*unk);
      mergeable.push_back(false);
    }
    // No unk token: the character is dropped, as HF does.
  }
  while (sym.size() > 1) {
    int64_t best_rank = -1, best_id = 0;
    std::size_t best_pos = 0;
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
      if (!mergeable[i] || !mergeable[i + 1]) continue;
      auto it = merges.find(key(sym[i], sym[i + 1]));
      if (it != merges.end() && (best_rank < 0 || it->second.first < best_rank)) {
        best_rank = it->second.first;
        best_id = it->second.second;
        best_pos = i;
      }
    }
    if (best_rank < 0) break;
    sym[best_pos] = best_id;
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    mergeable.erase(mergeable.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
  return sym;
}

std::unique_ptr<BpeModel> BpeModel::parse(const Json& j) {
  auto m = std::make_unique<BpeModel>();
  m->set_vocab(j.at("vocab"));
  m->prefix = get_string(j, "continuing_subword_prefix", "");
  m->suffix = get_string(j, "end_of_word_suffix", "");
  m->fuse_unk = get_bool(j, "fuse_unk", false);
  m->byte_fallback = get_bool(j, "byte_fallback", false);
  m->ignore_merges = get_bool(j, "ignore_merges", false);
  std::string unk = get_string(j, "unk_token", "");
  if (!unk.empty()) {
    m->unk = m->find(unk);
    if (!m->unk) throw FormatError("model.unk_token \"" + unk + "\" is not in model.vocab");
  }
  const Json& merges = j.contains("merges") ? j.at("merges") : Json::array();
  int64_t rank = 0;
  for (const auto& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {
      std::string s = mj.get<std::string>();
      auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw FormatError("model.merges[" + std::to_string(rank) + "] \"" + s + "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2) {
      a = mj.at(0).get<std::string>();
      b = mj.at(1).get<std::string>();
    } else {
      throw FormatError("model.merges[" + std::to_string(rank) + "] is neither \"a b\" nor [a, b]");
    }
    std::string b_tail = (!m->prefix.empty() && b.compare(0, m->prefix.size(), m->prefix) == 0) ? b.substr(m->prefix.size()) : b;
    auto ia = m->find(a), ib = m->find(b), im = m->find(a + b_tail);
    std::string where = "model.merges[" + std::to_string(rank) + "]: ";
    if (!ia) throw FormatError(where + "\"" + a + "\" is not in model.vocab");
    if (!ib) throw FormatError(where + "\"" + b + "\" is not in model.vocab");
    if (!im) throw FormatError(where + "the merged token \"" + a + b_tail + "\" is not in model.vocab");
    m->merges.emplace(BpeModel::key(*ia, *ib), std::make_pair(rank, *im));  // the first (lowest) rank wins
    ++rank;
  }
  return m;
}

}  // namespace hftrain::hf
