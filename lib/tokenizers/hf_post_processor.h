// tokenizer.json "post_processor": TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and Sequence,
// read into one template of special tokens and sequences (A, B) that encode_for_model fills.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizers/hf_json.h"

namespace hftrain::hf {

struct TemplatePiece {
  bool special = false;
  std::string name;  // special token key, or "A" / "B"
  int64_t type_id = 0;
};

struct PostProcessor {
  std::vector<TemplatePiece> single, pair;
  std::map<std::string, std::vector<int64_t>> special_ids;
  std::optional<std::pair<std::string, int64_t>> cls, sep;  // BertProcessing / RobertaProcessing
  std::size_t added(bool is_pair) const {
    std::size_t n = 0;
    for (const auto& p : is_pair ? pair : single)
      if (p.special) n += special_ids.at(p.name).size();
    return n;
  }
};

// Fills `pp` from the post_processor JSON; returns false when the processor adds nothing (ByteLevel, null).
bool parse_post_processor(const Json& j, PostProcessor& pp);

}  // namespace hftrain::hf
