// Tokenizer selection by the spec value `tokenizer:` of a data source:
//   bytes                      raw bytes (vocab 256)
//   PATH/tokenizer.json        an HF tokenizers file (byte-level BPE, WordPiece), or a directory holding one
//   PATH/tokenizer.model       a sentencepiece model, or a directory holding one (tokenizer.model, spiece.model or
//                              sentencepiece.bpe.model) and no tokenizer.json, or a tokenizer.json using a
//                              component not implemented here (e.g. Unigram)
// Character-level vocabularies depend on the text, so data sources build CharTokenizer themselves.
#pragma once

#include <memory>
#include <string>

#include "tokenizers/tokenizer.h"

namespace hftrain {

// Throws ConfigError naming `where` (e.g. "data.tokenizer") and the path when the value is not a tokenizer
// (missing file, malformed JSON with its position, unsupported component type).
std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& value, const std::string& where);

}  // namespace hftrain
