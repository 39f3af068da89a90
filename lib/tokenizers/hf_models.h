// tokenizer.json "model": the vocabulary and per-word tokenization of BPE (hf_bpe.cpp), WordPiece and WordLevel
// (hf_wordpiece.cpp) and Unigram (hf_unigram.cpp). Words come from the pre-tokenizer; each model turns one word
// into ids, with a cache of words (corpora repeat them).
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct Model {
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> tokens;  // by id ("" where the id is unused)
  // word -> ids, as HF's model caches: corpora repeat words. Words of kMaxCachedBytes or more are not cached (a
  // row that is one long word, e.g. Llama-2 legacy files without a pre-tokenizer split, would only fill it).
  static constexpr std::size_t kMaxCachedBytes = 256, kCacheCapacity = 200000;
  mutable std::shared_mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  virtual ~Model() = default;
  virtual std::vector<int64_t> tokenize_word(const std::string& word) const = 0;
  // Appends the ids of `word`, from the cache when it was seen before.
  void tokenize(const std::string& word, std::vector<int64_t>& ids) const;
  std::optional<int64_t> find(const std::string& token) const;
  // Reads a {token: id} object into vocab and tokens.
  void set_vocab(const Json& j);
};

struct BpeModel : Model {
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges;  // (left id, right id) -> (rank, merged id)
  std::optional<int64_t> unk;
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

  static uint64_t key(int64_t a, int64_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b); }
  static std::unique_ptr<BpeModel> parse(const Json& j);
  std::vector<int64_t> tokenize_word(const std::string& word) const override;
  // Applies the merges to the symbols of one word (unk symbols, mergeable false, never merge).
  std::vector<int64_t> merge_all(std::vector<int64_t>& sym, const std::vector<bool>& mergeable) const;
};

struct WordPieceModel : Model {
  std::string unk_token = "[UNK]", prefix = "##";
  std::size_t max_chars = 100;
  static std::unique_ptr<WordPieceModel> parse(const Json& j);
  std::vector<int64_t> tokenize_word(const std::string& word) const override;
};

struct WordLevelModel : Model {
  std::string unk_token = "<unk>";
  static std::unique_ptr<WordLevelModel> parse(const Json& j);
  std::vector<int64_t> tokenize_word(const std::string& word) const override;
};

struct UnigramModel : Model {
  std::vector<double> scores;  // by id
  double min_score = 0.0;
  std::optional<int64_t> unk;
  bool byte_fallback = false;
  // A byte trie of the pieces: (node << 8 | byte) -> child node; trie_piece[node] >= 0 where a piece ends.
  std::unordered_map<uint64_t, int32_t> trie_next;
  std::vector<int32_t> trie_piece;

  static std::unique_ptr<UnigramModel> parse(const Json& j);
  std::vector<int64_t> tokenize_word(const std::string& word) const override;
  // The best segmentation of `s` into pieces (unk runs fused), as strings.
  std::vector<std::string> segment(const std::string& s) const;

 private:
  void trie_insert(const std::string& piece);
};

// Throws FormatError (a missing model, an inconsistent vocabulary) or UnsupportedError (another model type).
std::unique_ptr<Model> parse_model(const Json& j);

}  // namespace hftrain::hf
