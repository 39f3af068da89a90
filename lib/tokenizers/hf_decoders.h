// tokenizer.json "decoder": ByteLevel, WordPiece, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder and
// Sequence, turning token strings back into text as HF's decode does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct Decoder {
  virtual ~Decoder() = default;
  virtual std::vector<std::string> apply(std::vector<std::string> tokens) const = 0;
};

// nullptr for a null decoder; throws FormatError / UnsupportedError.
std::unique_ptr<Decoder> parse_decoder(const Json& j);

}  // namespace hftrain::hf
