// tokenizer.json normalizers (see hf_normalizers.h).
#include "tokenizers/hf_normalizers.h"

#include <functional>
#include <optional>
#include <vector>

namespace hftrain::hf {
namespace {

// HF's StripAccents removes the combining marks (Mn, Mc, Me) and decomposes nothing itself (tokenizer.json
// files put NFD before it); BertNormalizer's strip_accents runs NFD and removes only (older) Mn.
std::string strip_accents(const std::string& s) {
  std::string out;
  for (char32_t c : uni::code_points(s))
    if (!uni::is_combining_mark(c)) uni::append_utf8(out, c);
  return out;
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

struct BertNormalizer : Normalizer {
  bool clean_text = true, chinese = true, lowercase = true;
  std::optional<bool> strip;
  std::string apply(const std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : uni::code_points(s)) {
      if (clean_text) {
        bool control = uni::is_bert_control(c);  // HF's table: unassigned code points are kept
        if (c == 0 || c == 0xFFFD || control) continue;
        if (uni::is_whitespace(c)) c = ' ';
      }
      if (chinese && is_chinese_char(c)) {
        out += ' ';
        uni::append_utf8(out, c);
        out += ' ';
      } else {
        uni::append_utf8(out, c);
      }
    }
    if (strip.value_or(lowercase)) {  // NFD, then HF's (older) nonspacing marks go
      std::string kept;
      for (char32_t c : uni::code_points(uni::normalize(out, "NFD")))
        if (!uni::is_bert_nonspacing_mark(c)) uni::append_utf8(kept, c);
      out = std::move(kept);
    }
    if (lowercase) out = uni::lowercase(out);
    return out;
  }
};

struct FunctionNormalizer : Normalizer {
  std::function<std::string(const std::string&)> fn;
  explicit FunctionNormalizer(std::function<std::string(const std::string&)> f) : fn(std::move(f)) {}
  std::string apply(const std::string& s) const override { return fn(s); }
};

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> steps;
  std::string apply(const std::string& s) const override {
    std::string out = s;
    for (const auto& n : steps) out = n->apply(out);
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const Json& j) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, "normalizer");
  if (type == "BertNormalizer") {
    auto n = std::make_unique<BertNormalizer>();
    n->clean_text = get_bool(j, "clean_text", true);
    n->chinese = get_bool(j, "handle_chinese_chars", true);
    n->lowercase = get_bool(j, "lowercase", true);
    if (j.contains("strip_accents") && !j.at("strip_accents").is_null()) n->strip = j.at("strip_accents").get<bool>();
    return n;
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    for (const auto& s : j.at("normalizers"))
      if (auto step = parse_normalizer(s)) n->steps.push_back(std::move(step));
    return n;
  }
  if (type == "Lowercase") return std::make_unique<FunctionNormalizer>([](const std::string& s) { return uni::lowercase(s); });
  if (type == "NFD" || type == "NFC" || type == "NFKD" || type == "NFKC")
    return std::make_unique<FunctionNormalizer>([type](const std::string& s) { return uni::normalize(s, type); });
  if (type == "StripAccents") return std::make_unique<FunctionNormalizer>([](const std::string& s) { return strip_accents(s); });
  if (type == "Strip") {
    bool left = get_bool(j, "strip_left", true), right = get_bool(j, "strip_right", true);
    return std::make_unique<FunctionNormalizer>([left, right](const std::string& s) {
      auto cps = uni::code_points(s);
      std::size_t b = 0, e = cps.size();
      if (left) while (b < e && uni::is_whitespace(cps[b])) ++b;
      if (right) while (e > b && uni::is_whitespace(cps[e - 1])) --e;
      std::string out;
      for (std::size_t i = b; i < e; ++i) uni::append_utf8(out, cps[i]);
      return out;
    });
  }
  if (type == "Replace") {
    Pattern p = parse_pattern(j.at("pattern"), "normalizer Replace");
    std::string content = j.at("content").get<std::string>();
    return std::make_unique<FunctionNormalizer>([p, content](const std::string& s) { return replace_pattern(s, p, content); });
  }
  if (type == "Prepend") {
    std::string prefix = j.at("prepend").get<std::string>();
    return std::make_unique<FunctionNormalizer>([prefix](const std::string& s) { return s.empty() ? s : prefix + s; });
  }
  if (type == "Precompiled") return make_precompiled(j);
  throw UnsupportedError("unsupported normalizer type \"" + type + "\"");
}

}  // namespace hftrain::hf
