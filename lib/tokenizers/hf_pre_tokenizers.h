// tokenizer.json "pre_tokenizer": ByteLevel (GPT-2 regex and byte-to-character mapping), Split, BertPreTokenizer,
// Whitespace, WhitespaceSplit, Punctuation, Digits, Metaspace and Sequence: they cut the normalized text into the
// words the model tokenizes one by one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // at_start: the first split begins at the start of the input (Metaspace's prepend_scheme "first").
  virtual void apply(std::vector<std::string>& splits, bool at_start) const = 0;
};

// nullptr for a null pre-tokenizer; throws FormatError / UnsupportedError.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j);

}  // namespace hftrain::hf
