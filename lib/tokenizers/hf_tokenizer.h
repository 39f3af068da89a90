// HF `tokenizers` tokenizer.json files: normalizer, pre-tokenizer, model (BPE incl. byte-level, WordPiece,
// WordLevel), added tokens, post-processor and decoder, as HF's fast tokenizers run them. Special token ids are
// discovered from the added tokens and, next to the file, tokenizer_config.json / special_tokens_map.json.
// Supported components and limits: docs/design.md "Tokenizers".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

#include "util/error.h"

namespace hftrain {

// The file is a valid tokenizer.json but uses a component this reader does not implement (e.g. a Unigram
// model); load_tokenizer then falls back to a sentencepiece model in the same directory when there is one.
class UnsupportedTokenizerError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

class HfTokenizer : public Tokenizer {
 public:
  // Throws ConfigError naming `where`, the path and the problem (missing file, malformed JSON with its
  // position, unsupported component naming its type, inconsistent vocabulary / merges).
  static std::shared_ptr<const HfTokenizer> from_file(const std::string& path, const std::string& where);

  int64_t vocab_size() const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override { return decode(ids, false); }
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const;
  std::string decode_without_special(const std::vector<int64_t>& ids) const override { return decode(ids, true); }
  Encoding encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const override;
  SpecialTokenIds special_tokens() const override;

  // Token strings of encode(text) (HF tokenizer.tokenize).
  std::vector<std::string> tokenize(const std::string& text) const;
  std::optional<int64_t> token_to_id(const std::string& token) const;
  std::string id_to_token(int64_t id) const;  // "" for an unknown id

  struct Impl;
  explicit HfTokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hftrain
