// tokenizer.json pre-tokenizers (see hf_pre_tokenizers.h).
#include "tokenizers/hf_pre_tokenizers.h"

#include <cctype>
#include <functional>
#include <tuple>

namespace hftrain::hf {
namespace {

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  throw FormatError("unsupported split behavior \"" + s + "\"");
}

// Splits `s` at the matched ranges as HF's SplitDelimiterBehavior does; appends non-empty pieces to `out`.
void split_by(const std::string& s, const std::vector<std::pair<std::size_t, std::size_t>>& matches, Behavior behavior,
              bool invert, std::vector<std::string>& out) {
  std::vector<std::tuple<std::size_t, std::size_t, bool>> parts;  // covering ranges with is_match
  std::size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) parts.emplace_back(last, b, false);
    parts.emplace_back(b, e, true);
    last = e;
  }
  if (last < s.size()) parts.emplace_back(last, s.size(), false);
  if (invert)
    for (auto& p : parts) std::get<2>(p) = !std::get<2>(p);
  std::vector<std::string> pieces;
  bool pending_next = false;  // MergedWithNext: the last piece waits for the next one
  bool prev_match = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto [b, e, is_match] = parts[i];
    std::string text = s.substr(b, e - b);
    switch (behavior) {
      case Behavior::Removed:
        if (!is_match) pieces.push_back(text);
        break;
      case Behavior::Isolated:
        pieces.push_back(text);
        break;
      case Behavior::Contiguous:
        if (is_match && prev_match && !pieces.empty()) pieces.back() += text;
        else pieces.push_back(text);
        break;
      case Behavior::MergedWithPrevious:
        if (is_match && !pieces.empty() && !prev_match) pieces.back() += text;
        else pieces.push_back(text);
        break;
      case Behavior::MergedWithNext:
        if (pending_next) pieces.back() += text;
        else pieces.push_back(text);
        pending_next = is_match;
        break;
    }
    prev_match = is_match;
  }
  for (auto& p : pieces)
    if (!p.empty()) out.push_back(std::move(p));
}

struct ByteLevelPreTokenizer : PreTokenizer {
  bool add_prefix_space = true, use_regex = true;
  std::shared_ptr<uni::Regex> regex;
  void apply(std::vector<std::string>& splits, bool at_start) const override {
    const auto& table = uni::bytes_to_chars();
    std::vector<std::string> out;
    for (auto& s : splits) {
      std::string text = (add_prefix_space && (s.empty() || s[0] != ' ')) ? " " + s : s;
      std::vector<std::string> pieces;
      if (use_regex) split_by(text, regex->find_all(text), Behavior::Isolated, false, pieces);
      else pieces.push_back(text);
      for (const auto& p : pieces) {
        std::string mapped;
        for (unsigned char b : p) uni::append_utf8(mapped, table[b]);
        out.push_back(std::move(mapped));
      }
    }
    splits = std::move(out);
  }
};

struct SplitPreTokenizer : PreTokenizer {
  Pattern pattern;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  void apply(std::vector<std::string>& splits, bool at_start) const override {
    std::vector<std::string> out;
    for (const auto& s : splits) split_by(s, pattern.find_all(s), behavior, invert, out);
    splits = std::move(out);
  }
};

// Splits where `is_delim` holds for a code point, one range per code point (or per run when `runs`).
template <typename Pred>
std::vector<std::pair<std::size_t, std::size_t>> char_matches(const std::string& s, Pred is_delim, bool runs) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t i = 0;
  for (char32_t c : uni::code_points(s)) {
    std::size_t n = uni::to_utf8(c).size();
    if (is_delim(c)) {
      if (runs && !out.empty() && out.back().second == i) out.back().second = i + n;
      else out.emplace_back(i, i + n);
    }
    i += n;
  }
  return out;
}

struct CharClassPreTokenizer : PreTokenizer {
  std::function<bool(char32_t)> pred;
  Behavior behavior;
  bool runs;
  CharClassPreTokenizer(std::function<bool(char32_t)> p, Behavior b, bool r) : pred(std::move(p)), behavior(b), runs(r) {}
  void apply(std::vector<std::string>& splits, bool at_start) const override {
    std::vector<std::string> out;
    for (const auto& s : splits) split_by(s, char_matches(s, pred, runs), behavior, false, out);
    splits = std::move(out);
  }
};

struct MetaspacePreTokenizer : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";
  std::string prepend_scheme = "always";
  bool split = true;
  void apply(std::vector<std::string>& splits, bool at_start) const override {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < splits.size(); ++i) {
      std::string s = splits[i];
      replace_all(s, " ", replacement);
      bool prepend = prepend_scheme == "always" || (prepend_scheme == "first" && i == 0 && at_start);
      if (prepend && s.compare(0, replacement.size(), replacement) != 0) s = replacement + s;
      if (!split) {
        out.push_back(s);
        continue;
      }
      Pattern p;
      p.literal = replacement;
      split_by(s, p.find_all(s), Behavior::MergedWithNext, false, out);
    }
    splits = std::move(out);
  }
};

struct SequencePreTokenizer : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void apply(std::vector<std::string>& splits, bool at_start) const override {
    for (const auto& p : steps) p->apply(splits, at_start);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, "pre_tokenizer");
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPreTokenizer>();
    p->add_prefix_space = get_bool(j, "add_prefix_space", true);
    p->use_regex = get_bool(j, "use_regex", true);
    if (p->use_regex) p->regex = std::make_shared<uni::Regex>(kGpt2Pattern);
    return p;
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPreTokenizer>();
    p->pattern = parse_pattern(j.at("pattern"), "pre_tokenizer Split");
    p->behavior = parse_behavior(get_string(j, "behavior", "Isolated"));
    p->invert = get_bool(j, "invert", false);
    return p;
  }
  if (type == "BertPreTokenizer") {
    auto p = std::make_unique<SequencePreTokenizer>();
    p->steps.push_back(std::make_unique<CharClassPreTokenizer>(uni::is_whitespace, Behavior::Removed, false));
    p->steps.push_back(std::make_unique<CharClassPreTokenizer>(uni::is_bert_punctuation, Behavior::Isolated, false));
    return p;
  }
  if (type == "Whitespace") {
    auto p = std::make_unique<SplitPreTokenizer>();
    p->pattern.regex = std::make_shared<uni::Regex>(R"(\w+|[^\w\s]+)");
    p->behavior = Behavior::Removed;
    p->invert = true;
    return p;
  }
  if (type == "WhitespaceSplit") return std::make_unique<CharClassPreTokenizer>(uni::is_whitespace, Behavior::Removed, false);
  if (type == "Punctuation")
    return std::make_unique<CharClassPreTokenizer>(uni::is_bert_punctuation, parse_behavior(get_string(j, "behavior", "Isolated")), false);
  if (type == "Digits") {
    bool individual = get_bool(j, "individual_digits", false);
    return std::make_unique<CharClassPreTokenizer>(uni::is_number, Behavior::Isolated, !individual);
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePreTokenizer>();
    p->replacement = get_string(j, "replacement", p->replacement);
    if (j.contains("prepend_scheme")) p->prepend_scheme = j.at("prepend_scheme").get<std::string>();
    else p->prepend_scheme = get_bool(j, "add_prefix_space", true) ? "always" : "never";
    p->split = get_bool(j, "split", true);
    return p;
  }
  if (type == "Sequence") {
    auto p = std::make_unique<SequencePreTokenizer>();
    for (const auto& s : j.at("pretokenizers"))
      if (auto step = parse_pre_tokenizer(s)) p->steps.push_back(std::move(step));
    return p;
  }
  throw UnsupportedError("unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace hftrain::hf
