// tokenizer.json "model": the vocabulary and per-word tokenization of BPE (hf_bpe.cpp), WordPiece and WordLevel
// (hf_wordpiece.cpp). Words come from the pre-tokenizer; each model turns one word into ids, with a cache of words
// (corpora repeat them).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct Model {
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> tokens;  // by id ("" where the id is unused)
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;  // word -> ids (corpora repeat words)

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

// Throws FormatError (a missing model, an inconsistent vocabulary) or UnsupportedError (another model type).
std::unique_ptr<Model> parse_model(const Json& j);

}  // namespace hftrain::hf
