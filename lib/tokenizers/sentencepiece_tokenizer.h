// sentencepiece .model files (Llama-2, T5, ...) through libsentencepiece, which lives in its own module
// (libhftrain_sentencepiece.so, see sentencepiece_shim.cpp) loaded on first use. Special tokens come from the model's
// bos/eos/unk/pad ids; encode_for_model adds bos (and eos) as tokenizer_config.json's add_bos_token /
// add_eos_token say when that file sits next to the model (default: bos only, as LlamaTokenizer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizers/tokenizer.h"

namespace hftrain {

// Trains a sentencepiece model (sentencepiece_trainer flags, e.g. "--input=... --model_prefix=..."); throws
// RuntimeFailure with sentencepiece's message. Used by tests to make small models.
void train_sentencepiece(const std::string& flags);

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws ConfigError naming `where` and the path when the file is missing or not a sentencepiece model.
  static std::shared_ptr<const SentencePieceTokenizer> from_file(const std::string& path, const std::string& where);

  int64_t vocab_size() const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  Encoding encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const override;
  SpecialTokenIds special_tokens() const override;

  std::vector<std::string> tokenize(const std::string& text) const;  // pieces
  std::string id_to_piece(int64_t id) const;
  int64_t piece_to_id(const std::string& piece) const;  // the unk id for an unknown piece
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  struct Impl;
  explicit SentencePieceTokenizer(std::shared_ptr<Impl> impl, bool add_bos, bool add_eos)
      : impl_(std::move(impl)), add_bos_(add_bos), add_eos_(add_eos) {}

 private:
  std::shared_ptr<Impl> impl_;
  bool add_bos_, add_eos_;
};

}  // namespace hftrain
