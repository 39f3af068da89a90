// The BPE model of tokenizer.json: characters (or their bytes, byte_fallback) of a word merged by merge rank, with
// continuing_subword_prefix / end_of_word_suffix, unk / fuse_unk and ignore_merges as HF tokenizers does.
#include <algorithm>
#include <cstdio>
#include <functional>

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
  return merge_all(sym, mergeable);
}

// HF's Word::merge_all: a heap of candidate merges ordered by (rank, position), the symbols a doubly linked list.
// An entry is stale when its left symbol was merged away, has no right neighbour any more, or the pair now there
// merges to another token; such entries are skipped. O(n log n) in the number of symbols.
std::vector<int64_t> BpeModel::merge_all(std::vector<int64_t>& sym, const std::vector<bool>& mergeable) const {
  const std::size_t n = sym.size();
  if (n < 2 || merges.empty()) return sym;
  struct Candidate {
    int64_t rank;
    std::size_t pos;
    int64_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<std::ptrdiff_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<std::ptrdiff_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::ptrdiff_t>(i + 1) : -1;
  }
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto push = [&](std::size_t left, std::size_t right) {
    if (!mergeable[left] || !mergeable[right]) return;
    auto it = merges.find(key(sym[left], sym[right]));
    if (it == merges.end()) return;
    heap.push_back({it->second.first, left, it->second.second});
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    Candidate top = heap.back();
    heap.pop_back();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    auto right = static_cast<std::size_t>(next[top.pos]);
    if (!mergeable[right]) continue;
    auto it = merges.find(key(sym[top.pos], sym[right]));
    if (it == merges.end() || it->second.second != top.new_id) continue;
    sym[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[static_cast<std::size_t>(next[right])] = static_cast<std::ptrdiff_t>(top.pos);
    if (prev[top.pos] >= 0) push(static_cast<std::size_t>(prev[top.pos]), top.pos);
    if (next[top.pos] >= 0) push(top.pos, static_cast<std::size_t>(next[top.pos]));
  }
  std::vector<int64_t> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (alive[i]) out.push_back(sym[i]);
  return out;
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
