// The Unigram model of tokenizer.json (T5, mT5, ALBERT, XLNet): pieces with log-probability scores; a word is
// segmented by Viterbi over the pieces that start at each character (HF's encode_optimized, after
// sentencepiece's unigram_model.cc), characters no piece covers scoring min_score - 10 as unk, consecutive unk
// characters fused into one; byte_fallback spells a fused unk run as <0xXX> pieces when all of them exist.
#include <cstdio>
#include <limits>

#include "tokenizers/hf_models.h"
#include "util/error.h"

namespace hftrain::hf {

namespace {
constexpr double kUnkPenalty = 10.0;  // HF's K_UNK_PENALTY
}

std::unique_ptr<UnigramModel> UnigramModel::parse(const Json& j) {
  auto m = std::make_unique<UnigramModel>();
  if (!j.contains("vocab") || !j.at("vocab").is_array())
    throw FormatError("model.vocab of a Unigram model must be a list of [piece, score]");
  const Json& vocab = j.at("vocab");
  m->scores.reserve(vocab.size());
  m->tokens.reserve(vocab.size());
  m->min_score = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    const Json& e = vocab[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      throw FormatError("model.vocab[" + std::to_string(i) + "] is not [piece, score]");
    std::string piece = e[0].get<std::string>();
    double score = e[1].get<double>();
    auto id = static_cast<int64_t>(i);
    m->vocab[piece] = id;  // a repeated piece: the last id wins, as HF
    m->tokens.push_back(piece);
    m->scores.push_back(score);
    m->min_score = std::min(m->min_score, score);
    m->trie_insert(piece);
  }
  if (j.contains("unk_id") && !j.at("unk_id").is_null()) {
    if (vocab.empty()) throw FormatError("model.unk_id is set but model.vocab is empty");
    auto unk = j.at("unk_id").get<int64_t>();
    if (unk < 0 || static_cast<std::size_t>(unk) >= vocab.size())
      throw FormatError("model.unk_id " + std::to_string(unk) + " is outside model.vocab (" + std::to_string(vocab.size()) +
                        " pieces)");
    m->unk = unk;
  }
  m->byte_fallback = get_bool(j, "byte_fallback", false);
  return m;
}

void UnigramModel::trie_insert(const std::string& piece) {
  if (trie_piece.empty()) trie_piece.push_back(-1);  // the root
  int32_t node = 0;
  for (unsigned char b : piece) {
    uint64_t k = (static_cast<uint64_t>(node) << 8) | b;
    auto it = trie_next.find(k);
    if (it == trie_next.end()) {
      it = trie_next.emplace(k, static_cast<int32_t>(trie_piece.size())).first;
      trie_piece.push_back(-1);
    }
    node = it->second;
  }
  if (!piece.empty()) trie_piece[static_cast<std::size_t>(node)] = 1;
}

std::vector<std::string> UnigramModel::segment(const std::string& s) const {
  struct Node {
    int64_t id = 0;
    double score = 0.0;
    std::ptrdiff_t start = -1;  // -1: not reached yet
  };
  const std::size_t size = s.size();
  std::vector<Node> best(size + 1);
  const double unk_score = min_score - kUnkPenalty;
  std::size_t start = 0;
  while (start < size) {
    const double here = best[start].score;
    const auto mblen = static_cast<std::size_t>(std::max(1, uni::utf8_length(static_cast<unsigned char>(s[start]))));
    bool has_single = false;
    int32_t node = 0;
    for (std::size_t end = start; end < size && !trie_piece.empty(); ++end) {  // common prefix search
      auto it = trie_next.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[end]));
      if (it == trie_next.end()) break;
      node = it->second;
      if (trie_piece[static_cast<std::size_t>(node)] < 0) continue;
      const std::size_t key_end = end + 1;
      const int64_t id = vocab.at(s.substr(start, key_end - start));
      const double candidate = scores[static_cast<std::size_t>(id)] + here;
      Node& target = best[key_end];
      if (target.start < 0 || candidate > target.score) target = {id, candidate, static_cast<std::ptrdiff_t>(start)};
      if (key_end - start == mblen) has_single = true;
    }
    if (!has_single) {
      Node& target = best[std::min(size, start + mblen)];
      const double candidate = unk_score + here;
      if (target.start < 0 || candidate > target.score) {
        if (!unk) throw RuntimeFailure("Unigram: the text has a character no piece covers and the model has no unk_id");
        target = {*unk, candidate, static_cast<std::ptrdiff_t>(start)};
      }
    }
    start += mblen;
  }
  // Back from the end; runs of unk pieces are fused into one string.
  std::vector<std::string> out;
  std::vector<std::string> run;  // the unk pieces of the current run, last first
  auto flush = [&] {
    if (run.empty()) return;
    std::string fused;
    for (auto it = run.rbegin(); it != run.rend(); ++it) fused += *it;
    out.push_back(std::move(fused));
    run.clear();
  };
  std::size_t end = size;
  while (end > 0) {
    const Node& n = best[end];
    const auto b = static_cast<std::size_t>(n.start);
    if (unk && n.id == *unk) {
      run.push_back(s.substr(b, end - b));
    } else {
      flush();
      out.push_back(s.substr(b, end - b));
    }
    end = b;
  }
  flush();
  return {out.rbegin(), out.rend()};
}

std::vector<int64_t> UnigramModel::tokenize_word(const std::string& word) const {
  std::vector<int64_t> ids;
  for (const std::string& piece : segment(word)) {
    if (auto id = find(piece)) {
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback) {
      std::vector<int64_t> bytes;
      for (unsigned char b : piece) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        if (auto id = find(name)) bytes.push_back(*id);
        else break;
      }
      if (bytes.size() == piece.size()) {
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!unk) throw RuntimeFailure("Unigram: the text has a character no piece covers and the model has no unk_id");
    ids.push_back(*unk);
  }
  return ids;
}

}  // namespace hftrain::hf
