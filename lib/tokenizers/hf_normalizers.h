// tokenizer.json "normalizer": BertNormalizer, Sequence, Lowercase, NFD/NFC/NFKD/NFKC, StripAccents, Strip,
// Replace, Prepend and Precompiled, applied to the text before pre-tokenization as HF tokenizers does.
#pragma once

#include <memory>
#include <string>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual std::string apply(const std::string& s) const = 0;
};

// The Precompiled normalizer (sentencepiece's precompiled_charsmap, hf_precompiled.cpp).
std::unique_ptr<Normalizer> make_precompiled(const Json& j);

// nullptr for a null normalizer; throws FormatError / UnsupportedError.
std::unique_ptr<Normalizer> parse_normalizer(const Json& j);

}  // namespace hftrain::hf
