// tokenizer.json reader and the HF tokenizers pipeline: added tokens -> normalizer -> pre-tokenizer -> model ->
// post-processor, and the decoders (see hf_tokenizer.h).
#include "tokenizers/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "tokenizers/unicode_text.h"
#include "util/error.h"

namespace hftrain {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
namespace uni = hftrain::unicode;

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Problems in the file's structure; turned into a ConfigError naming the file by from_file.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A component type this reader does not implement.
struct UnsupportedError : FormatError {
  using FormatError::FormatError;
};

bool get_bool(const Json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<bool>();
}
std::string get_string(const Json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<std::string>();
}
std::string type_of(const Json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("type")) throw FormatError(what + " has no \"type\"");
  return j.at("type").get<std::string>();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// ---------------------------------------------------------------- normalizers

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual std::string apply(const std::string& s) const = 0;
};

std::string strip_accents(const std::string& s) {
  std::string out;
  for (char32_t c : uni::code_points(uni::normalize(s, "NFD")))
    if (!uni::is_nonspacing_mark(c)) uni::append_utf8(out, c);
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
        bool control = c != '\t' && c != '\n' && c != '\r' && uni::is_other(c);
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
    if (strip.value_or(lowercase)) out = strip_accents(out);
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

// A `pattern` object: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::shared_ptr<uni::Regex> regex;
  std::vector<std::pair<std::size_t, std::size_t>> find_all(const std::string& s) const {
    if (regex) return regex->find_all(s);
    std::vector<std::pair<std::size_t, std::size_t>> out;
    if (literal.empty()) return out;
    for (std::size_t pos = s.find(literal); pos != std::string::npos; pos = s.find(literal, pos + literal.size()))
      out.emplace_back(pos, pos + literal.size());
    return out;
  }
};

Pattern parse_pattern(const Json& j, const std::string& what) {
  Pattern p;
  if (j.is_string()) {
    p.literal = j.get<std::string>();
  } else if (j.contains("String")) {
    p.literal = j.at("String").get<std::string>();
  } else if (j.contains("Regex")) {
    try {
      p.regex = std::make_shared<uni::Regex>(j.at("Regex").get<std::string>());
    } catch (const std::runtime_error& e) {
      throw FormatError(what + ": " + e.what());
    }
  } else {
    throw FormatError(what + ".pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

std::string replace_pattern(const std::string& s, const Pattern& p, const std::string& content) {
  std::string out;
  std::size_t last = 0;
  for (auto [b, e] : p.find_all(s)) {
    out.append(s, last, b - last);
    out += content;
    last = e;
  }
  out.append(s, last, std::string::npos);
  return out;
}

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
  throw UnsupportedError("unsupported normalizer type \"" + type + "\"");
}

// ---------------------------------------------------------------- pre-tokenizers

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

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // at_start: the first split begins at the start of the input (Metaspace's prepend_scheme "first").
  virtual void apply(std::vector<std::string>& splits, bool at_start) const = 0;
};

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

bool is_bert_punctuation(char32_t c) {
  return (c < 128 && std::ispunct(static_cast<int>(c))) || uni::is_punctuation(c);
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
    p->steps.push_back(std::make_unique<CharClassPreTokenizer>(is_bert_punctuation, Behavior::Isolated, false));
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
    return std::make_unique<CharClassPreTokenizer>(is_bert_punctuation, parse_behavior(get_string(j, "behavior", "Isolated")), false);
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

// ---------------------------------------------------------------- models

struct Model {
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> tokens;  // by id ("" where the id is unused)
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;  // word -> ids (corpora repeat words)

  virtual ~Model() = default;
  virtual std::vector<int64_t> tokenize_word(const std::string& word) const = 0;
  void tokenize(const std::string& word, std::vector<int64_t>& ids) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      auto it = cache.find(word);
      if (it != cache.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int64_t> out = tokenize_word(word);
    ids.insert(ids.end(), out.begin(), out.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() > 200000) cache.clear();
    cache.emplace(word, std::move(out));
  }
  std::optional<int64_t> find(const std::string& token) const {
    auto it = vocab.find(token);
    if (it == vocab.end()) return std::nullopt;
    return it->second;
  }
  void set_vocab(const Json& j) {
    if (!j.is_object()) throw FormatError("model.vocab must be an object {token: id}");
    for (auto it = j.begin(); it != j.end(); ++it) {
      int64_t id = it.value().get<int64_t>();
      if (id < 0) throw FormatError("model.vocab: token \"" + it.key() + "\" has negative id");
      vocab[it.key()] = id;
      if (static_cast<std::size_t>(id) >= tokens.size()) tokens.resize(static_cast<std::size_t>(id) + 1);
      tokens[static_cast<std::size_t>(id)] = it.key();
    }
  }
};

struct BpeModel : Model {
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges;  // (left id, right id) -> (rank, merged id)
  std::optional<int64_t> unk;
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

  static uint64_t key(int64_t a, int64_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b); }

  std::vector<int64_t> tokenize_word(const std::string& word) const override {
    if (ignore_merges)
      if (auto id = find(word)) return {*id};
    std::vector<int64_t> sym;
    std::vector<bool> mergeable;  // false for unk symbols, which never merge
    auto cps = uni::code_points(word);
    for (std::size_t i = 0; i < cps.size(); ++i) {
      std::string c = uni::to_utf8(cps[i]);
      if (i > 0) c = prefix + c;
      if (i + 1 == cps.size()) c += suffix;
      if (auto id = find(c)) {
        sym.push_back(*id);
        mergeable.push_back(true);
        continue;
      }
      if (byte_fallback) {
        std::vector<int64_t> bytes;
        for (unsigned char b : uni::to_utf8(cps[i])) {
          char name[8];
          std::snprintf(name, sizeof(name), "<0x%02X>", b);
          if (auto id = find(name)) bytes.push_back(*id);
          else break;
        }
        if (bytes.size() == uni::to_utf8(cps[i]).size()) {
          for (auto id : bytes) {
            sym.push_back(id);
            mergeable.push_back(true);
          }
          continue;
        }
      }
      if (unk) {
        if (fuse_unk && !sym.empty() && !mergeable.back() && sym.back() == *unk) continue;
        sym.push_back(*unk);
        mergeable.push_back(false);
      }
      // No unk token: the character is dropped, as HF does.
    }
    while (sym.size() > 1) {
      int64_t best_rank = -1, best_id = 0;
      std::size_t best_pos = 0;
      for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
        if (!mergeable[i] || !mergeable[i + 1]) continue;
        auto it = merges.find(key(sym[i], sym[i + 1]));
        if (it != merges.end() && (best_rank < 0 || it->second.first < best_rank)) {
          best_rank = it->second.first;
          best_id = it->second.second;
          best_pos = i;
        }
      }
      if (best_rank < 0) break;
      sym[best_pos] = best_id;
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
      mergeable.erase(mergeable.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    }
    return sym;
  }
};

struct WordPieceModel : Model {
  std::string unk_token = "[UNK]", prefix = "##";
  std::size_t max_chars = 100;
  std::vector<int64_t> tokenize_word(const std::string& word) const override {
    auto cps = uni::code_points(word);
    std::vector<int64_t> out;
    bool bad = cps.size() > max_chars;
    // Byte offsets of the code points, to take substrings at character boundaries.
    std::vector<std::size_t> offs(cps.size() + 1, 0);
    for (std::size_t i = 0; i < cps.size(); ++i) offs[i + 1] = offs[i] + uni::to_utf8(cps[i]).size();
    std::size_t start = 0;
    while (!bad && start < cps.size()) {
      std::size_t end = cps.size();
      std::optional<int64_t> found;
      while (start < end) {
        std::string sub = word.substr(offs[start], offs[end] - offs[start]);
        if (start > 0) sub = prefix + sub;
        if ((found = find(sub))) break;
        --end;
      }
      if (!found) bad = true;
      else out.push_back(*found);
      start = end;
    }
    if (bad) {
      auto unk = find(unk_token);
      if (!unk) throw RuntimeFailure("WordPiece: the unk_token \"" + unk_token + "\" is not in the vocabulary");
      return {*unk};
    }
    return out;
  }
};

struct WordLevelModel : Model {
  std::string unk_token = "<unk>";
  std::vector<int64_t> tokenize_word(const std::string& word) const override {
    if (auto id = find(word)) return {*id};
    if (auto unk = find(unk_token)) return {*unk};
    throw RuntimeFailure("WordLevel: \"" + word + "\" and the unk_token \"" + unk_token + "\" are not in the vocabulary");
  }
};

std::unique_ptr<Model> parse_model(const Json& j) {
  if (!j.is_object()) throw FormatError("\"model\" is missing");
  // Files written by older tokenizers versions may omit model.type; the keys then tell the type.
  std::string type = j.contains("type") ? j.at("type").get<std::string>()
                     : j.contains("merges")              ? "BPE"
                     : j.contains("max_input_chars_per_word") ? "WordPiece"
                                                          : "";
  if (type == "BPE") {
    auto m = std::make_unique<BpeModel>();
    m->set_vocab(j.at("vocab"));
    m->prefix = get_string(j, "continuing_subword_prefix", "");
    m->suffix = get_string(j, "end_of_word_suffix", "");
    m->fuse_unk = get_bool(j, "fuse_unk", false);
    m->byte_fallback = get_bool(j, "byte_fallback", false);
    m->ignore_merges = get_bool(j, "ignore_merges", false);
    std::string unk = get_string(j, "unk_token", "");
    if (!unk.empty()) {
      m->unk = m->find(unk);
      if (!m->unk) throw FormatError("model.unk_token \"" + unk + "\" is not in model.vocab");
    }
    const Json& merges = j.contains("merges") ? j.at("merges") : Json::array();
    int64_t rank = 0;
    for (const auto& mj : merges) {
      std::string a, b;
      if (mj.is_string()) {
        std::string s = mj.get<std::string>();
        auto sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          throw FormatError("model.merges[" + std::to_string(rank) + "] \"" + s + "\" is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (mj.is_array() && mj.size() == 2) {
        a = mj.at(0).get<std::string>();
        b = mj.at(1).get<std::string>();
      } else {
        throw FormatError("model.merges[" + std::to_string(rank) + "] is neither \"a b\" nor [a, b]");
      }
      std::string b_tail = (!m->prefix.empty() && b.compare(0, m->prefix.size(), m->prefix) == 0) ? b.substr(m->prefix.size()) : b;
      auto ia = m->find(a), ib = m->find(b), im = m->find(a + b_tail);
      std::string where = "model.merges[" + std::to_string(rank) + "]: ";
      if (!ia) throw FormatError(where + "\"" + a + "\" is not in model.vocab");
      if (!ib) throw FormatError(where + "\"" + b + "\" is not in model.vocab");
      if (!im) throw FormatError(where + "the merged token \"" + a + b_tail + "\" is not in model.vocab");
      m->merges.emplace(BpeModel::key(*ia, *ib), std::make_pair(rank, *im));  // the first (lowest) rank wins
      ++rank;
    }
    return m;
  }
  if (type == "WordPiece") {
    auto m = std::make_unique<WordPieceModel>();
    m->set_vocab(j.at("vocab"));
    m->unk_token = get_string(j, "unk_token", m->unk_token);
    m->prefix = get_string(j, "continuing_subword_prefix", m->prefix);
    if (j.contains("max_input_chars_per_word")) m->max_chars = j.at("max_input_chars_per_word").get<std::size_t>();
    return m;
  }
  if (type == "WordLevel") {
    auto m = std::make_unique<WordLevelModel>();
    m->set_vocab(j.at("vocab"));
    m->unk_token = get_string(j, "unk_token", m->unk_token);
    return m;
  }
  throw UnsupportedError("unsupported model type \"" + type + "\" (supported: BPE, WordPiece, WordLevel)");
}

// ---------------------------------------------------------------- post-processor

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

std::vector<TemplatePiece> parse_template(const Json& j, const std::string& what) {
  std::vector<TemplatePiece> out;
  for (const auto& pj : j) {
    TemplatePiece p;
    if (pj.contains("SpecialToken")) {
      p.special = true;
      p.name = pj.at("SpecialToken").at("id").get<std::string>();
      p.type_id = pj.at("SpecialToken").value("type_id", 0);
    } else if (pj.contains("Sequence")) {
      p.name = pj.at("Sequence").at("id").get<std::string>();
      p.type_id = pj.at("Sequence").value("type_id", 0);
      if (p.name != "A" && p.name != "B") throw FormatError(what + ": sequence id must be A or B, not " + p.name);
    } else {
      throw FormatError(what + ": a piece is neither SpecialToken nor Sequence");
    }
    out.push_back(p);
  }
  return out;
}

std::pair<std::string, int64_t> token_and_id(const Json& j, const std::string& what) {
  if (!j.is_array() || j.size() != 2) throw FormatError(what + " must be [token, id]");
  return {j.at(0).get<std::string>(), j.at(1).get<int64_t>()};
}

// Fills `pp` from the post_processor JSON; returns false when the processor adds nothing (ByteLevel, null).
bool parse_post_processor(const Json& j, PostProcessor& pp) {
  if (j.is_null()) return false;
  std::string type = type_of(j, "post_processor");
  if (type == "ByteLevel") return false;
  if (type == "Sequence") {
    bool any = false;
    for (const auto& s : j.at("processors")) any = parse_post_processor(s, pp) || any;
    return any;
  }
  auto sp = [](const std::string& n, int64_t t) { return TemplatePiece{true, n, t}; };
  auto seq = [](const std::string& n, int64_t t) { return TemplatePiece{false, n, t}; };
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    pp.cls = token_and_id(j.at("cls"), "post_processor.cls");
    pp.sep = token_and_id(j.at("sep"), "post_processor.sep");
    const std::string c = pp.cls->first, s = pp.sep->first;
    pp.special_ids = {{c, {pp.cls->second}}, {s, {pp.sep->second}}};
    pp.single = {sp(c, 0), seq("A", 0), sp(s, 0)};
    if (type == "BertProcessing") pp.pair = {sp(c, 0), seq("A", 0), sp(s, 0), seq("B", 1), sp(s, 1)};
    else pp.pair = {sp(c, 0), seq("A", 0), sp(s, 0), sp(s, 0), seq("B", 0), sp(s, 0)};
    return true;
  }
  if (type == "TemplateProcessing") {
    pp.single = parse_template(j.at("single"), "post_processor.single");
    pp.pair = parse_template(j.at("pair"), "post_processor.pair");
    pp.special_ids.clear();
    const Json& st = j.at("special_tokens");
    for (auto it = st.begin(); it != st.end(); ++it) pp.special_ids[it.key()] = it.value().at("ids").get<std::vector<int64_t>>();
    for (const auto* t : {&pp.single, &pp.pair})
      for (const auto& p : *t)
        if (p.special && !pp.special_ids.count(p.name))
          throw FormatError("post_processor: special token \"" + p.name + "\" is not in special_tokens");
    return true;
  }
  throw UnsupportedError("unsupported post_processor type \"" + type + "\"");
}

// ---------------------------------------------------------------- decoders

struct Decoder {
  virtual ~Decoder() = default;
  virtual std::vector<std::string> apply(std::vector<std::string> tokens) const = 0;
};

// Bytes -> text as Rust's String::from_utf8_lossy (malformed bytes become U+FFFD).
std::string lossy(const std::string& bytes) { return uni::sanitize_utf8(bytes); }

struct ByteLevelDecoder : Decoder {
  std::vector<std::string> apply(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string tb;
      bool ok = true;
      for (char32_t c : uni::code_points(t)) {
        int b = uni::char_to_byte(c);
        if (b < 0) {
          ok = false;
          break;
        }
        tb.push_back(static_cast<char>(b));
      }
      bytes += ok ? tb : t;
    }
    return {lossy(bytes)};
  }
};

std::string cleanup_tokenization(std::string s) {
  static const std::array<std::pair<const char*, const char*>, 11> rules = {{{" .", "."},
                                                                              {" ?", "?"},
                                                                              {" !", "!"},
                                                                              {" ,", ","},
                                                                              {" ' ", "'"},
                                                                              {" n't", "n't"},
                                                                              {" 'm", "'m"},
                                                                              {" do not", " don't"},
                                                                              {" 's", "'s"},
                                                                              {" 've", "'ve"},
                                                                              {" 're", "'re"}}};
  for (const auto& [from, to] : rules) replace_all(s, from, to);
  return s;
}

struct WordPieceDecoder : Decoder {
  std::string prefix = "##";
  bool cleanup = true;
  std::vector<std::string> apply(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0) t = t.substr(prefix.size());
        else t = " " + t;
      }
      if (cleanup) t = cleanup_tokenization(t);
    }
    return tokens;
  }
};

struct FunctionDecoder : Decoder {
  std::function<std::vector<std::string>(std::vector<std::string>)> fn;
  explicit FunctionDecoder(std::function<std::vector<std::string>(std::vector<std::string>)> f) : fn(std::move(f)) {}
  std::vector<std::string> apply(std::vector<std::string> tokens) const override { return fn(std::move(tokens)); }
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> steps;
  std::vector<std::string> apply(std::vector<std::string> tokens) const override {
    for (const auto& d : steps) tokens = d->apply(std::move(tokens));
    return tokens;
  }
};

std::unique_ptr<Decoder> parse_decoder(const Json& j) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") {
    auto d = std::make_unique<WordPieceDecoder>();
    d->prefix = get_string(j, "prefix", "##");
    d->cleanup = get_bool(j, "cleanup", true);
    return d;
  }
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDecoder>();
    for (const auto& s : j.at("decoders"))
      if (auto step = parse_decoder(s)) d->steps.push_back(std::move(step));
    return d;
  }
  if (type == "Replace") {
    Pattern p = parse_pattern(j.at("pattern"), "decoder Replace");
    std::string content = j.at("content").get<std::string>();
    return std::make_unique<FunctionDecoder>([p, content](std::vector<std::string> ts) {
      for (auto& t : ts) t = replace_pattern(t, p, content);
      return ts;
    });
  }
  if (type == "Fuse") {
    return std::make_unique<FunctionDecoder>([](std::vector<std::string> ts) {
      std::string all;
      for (const auto& t : ts) all += t;
      return std::vector<std::string>{all};
    });
  }
  if (type == "Strip") {
    std::string content = get_string(j, "content", " ");
    std::size_t start = j.value("start", 0), stop = j.value("stop", 0);
    return std::make_unique<FunctionDecoder>([content, start, stop](std::vector<std::string> ts) {
      for (auto& t : ts) {
        for (std::size_t k = 0; k < start && t.compare(0, content.size(), content) == 0 && !content.empty(); ++k) t.erase(0, content.size());
        for (std::size_t k = 0; k < stop && !content.empty() && t.size() >= content.size() &&
                                t.compare(t.size() - content.size(), content.size(), content) == 0;
             ++k)
          t.erase(t.size() - content.size());
      }
      return ts;
    });
  }
  if (type == "ByteFallback") {
    return std::make_unique<FunctionDecoder>([](std::vector<std::string> ts) {
      std::vector<std::string> out;
      std::string pending;  // consecutive <0xXX> bytes
      auto flush = [&] {  // a run of bytes that is not valid UTF-8 becomes one U+FFFD per byte (as HF)
        if (!pending.empty()) {
          std::string text = lossy(pending);
          if (text != pending) {
            text.clear();
            for (std::size_t k = 0; k < pending.size(); ++k) text += "\xEF\xBF\xBD";
          }
          out.push_back(text);
        }
        pending.clear();
      };
      for (const auto& t : ts) {
        unsigned int b;
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::sscanf(t.c_str() + 3, "%2x", &b) == 1) {
          pending.push_back(static_cast<char>(b));
        } else {
          flush();
          out.push_back(t);
        }
      }
      flush();
      return out;
    });
  }
  if (type == "Metaspace") {
    std::string replacement = get_string(j, "replacement", "\xE2\x96\x81");
    bool strip_first = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>() != "never"
                                                     : get_bool(j, "add_prefix_space", true);
    return std::make_unique<FunctionDecoder>([replacement, strip_first](std::vector<std::string> ts) {
      for (std::size_t i = 0; i < ts.size(); ++i) {
        replace_all(ts[i], replacement, " ");
        if (i == 0 && strip_first && !ts[i].empty() && ts[i][0] == ' ') ts[i].erase(0, 1);
      }
      return ts;
    });
  }
  if (type == "BPEDecoder") {
    std::string suffix = get_string(j, "suffix", "</w>");
    return std::make_unique<FunctionDecoder>([suffix](std::vector<std::string> ts) {
      for (std::size_t i = 0; i < ts.size(); ++i) replace_all(ts[i], suffix, i + 1 == ts.size() ? "" : " ");
      return ts;
    });
  }
  throw UnsupportedError("unsupported decoder type \"" + type + "\"");
}

// ---------------------------------------------------------------- added tokens

struct AddedToken {
  int64_t id = 0;
  std::string content, match;  // match: content, normalized when `normalized`
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Leftmost-longest matcher over a set of added tokens, bucketed by first byte.
struct AddedMatcher {
  std::vector<const AddedToken*> by_byte[256];
  bool empty = true;
  void add(const AddedToken* t) {
    if (t->match.empty()) return;
    auto& v = by_byte[static_cast<unsigned char>(t->match[0])];
    v.push_back(t);
    std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->match.size() > b->match.size(); });
    empty = false;
  }
};

bool is_word_char(char32_t c) { return uni::is_alphanumeric(c) || c == '_'; }

// A segment of the input: text still to tokenize (id < 0) or an added token's id.
struct Segment {
  std::string text;
  int64_t id = -1;
};

void split_added(const std::string& text, const AddedMatcher& m, std::vector<Segment>& out) {
  if (m.empty) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  std::size_t last = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const AddedToken* t : m.by_byte[static_cast<unsigned char>(text[i])]) {
      if (text.compare(i, t->match.size(), t->match) != 0) continue;
      if (t->single_word) {
        std::size_t end = i + t->match.size();
        bool before = i > 0 && [&] {
          std::size_t k = i - 1;
          while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
          auto cps = uni::code_points(text.substr(k, i - k));
          return !cps.empty() && is_word_char(cps[0]);
        }();
        bool after = end < text.size() && [&] {
          auto cps = uni::code_points(text.substr(end, static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[end])))));
          return !cps.empty() && is_word_char(cps[0]);
        }();
        if (before || after) continue;
      }
      hit = t;
      break;
    }
    if (!hit) {
      i += static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[i])));
      continue;
    }
    std::size_t start = i, end = i + hit->match.size();
    if (hit->lstrip)  // whitespace before the token, not before the end of the previous match
      while (start > last) {
        std::size_t k = start - 1;
        while (k > last && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        auto cps = uni::code_points(text.substr(k, start - k));
        if (cps.size() != 1 || !uni::is_whitespace(cps[0])) break;
        start = k;
      }
    if (hit->rstrip)
      while (end < text.size()) {
        std::size_t n = static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(text[end])));
        auto cps = uni::code_points(text.substr(end, n));
        if (cps.size() != 1 || !uni::is_whitespace(cps[0])) break;
        end += n;
      }
    if (start > last) out.push_back({text.substr(last, start - last), -1});
    out.push_back({"", hit->id});
    last = i = end;
  }
  if (last < text.size()) out.push_back({text.substr(last), -1});
}

std::optional<std::string> token_content(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j.at("content").is_string()) return j.at("content").get<std::string>();
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------- the tokenizer

struct HfTokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post;
  bool has_post = false;
  std::vector<AddedToken> added;
  std::unordered_map<int64_t, const AddedToken*> added_by_id;
  std::unordered_map<std::string, int64_t> added_by_content;
  AddedMatcher raw_matcher, normalized_matcher;
  SpecialTokenIds specials;
  int64_t size = 0;

  void encode_into(const std::string& input, std::vector<int64_t>& ids) const {
    std::string text = uni::sanitize_utf8(input);
    std::vector<Segment> raw;
    split_added(text, raw_matcher, raw);
    bool at_start = true;  // the segment begins the input
    for (const auto& seg : raw) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        at_start = false;
        continue;
      }
      std::string normalized = normalizer ? normalizer->apply(seg.text) : seg.text;
      std::vector<Segment> parts;
      split_added(normalized, normalized_matcher, parts);
      for (const auto& part : parts) {
        if (part.id >= 0) {
          ids.push_back(part.id);
          at_start = false;
          continue;
        }
        std::vector<std::string> words{part.text};
        if (pre_tokenizer) pre_tokenizer->apply(words, at_start);
        at_start = false;
        for (const auto& w : words)
          if (!w.empty()) model->tokenize(w, ids);
      }
    }
  }

  std::optional<int64_t> find(const std::string& token) const {
    auto it = added_by_content.find(token);
    if (it != added_by_content.end()) return it->second;
    return model->find(token);
  }
};

std::shared_ptr<const HfTokenizer> HfTokenizer::from_file(const std::string& path, const std::string& where) {
  const std::string prefix = where + ": " + path + ": ";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(prefix + "cannot open the tokenizer file");
  std::stringstream buf;
  buf << in.rdbuf();
  Json j;
  try {
    j = Json::parse(buf.str());
  } catch (const Json::parse_error& e) {
    throw ConfigError(prefix + "malformed JSON: " + e.what());
  }
  auto impl = std::make_shared<Impl>();
  try {
    if (!j.is_object()) throw FormatError("the top level is not a JSON object");
    impl->model = parse_model(j.contains("model") ? j.at("model") : Json());
    impl->normalizer = parse_normalizer(j.value("normalizer", Json()));
    impl->pre_tokenizer = parse_pre_tokenizer(j.value("pre_tokenizer", Json()));
    impl->decoder = parse_decoder(j.value("decoder", Json()));
    impl->has_post = parse_post_processor(j.value("post_processor", Json()), impl->post);
    if (j.contains("truncation") && !j.at("truncation").is_null()) {
      // Truncation is chosen per call (max_length), as transformers does; the stored setting is not applied.
    }
    int64_t max_id = static_cast<int64_t>(impl->model->tokens.size()) - 1;
    const Json& added = j.contains("added_tokens") && !j.at("added_tokens").is_null() ? j.at("added_tokens") : Json::array();
    for (const auto& aj : added) {
      AddedToken t;
      t.id = aj.at("id").get<int64_t>();
      t.content = aj.at("content").get<std::string>();
      t.single_word = get_bool(aj, "single_word", false);
      t.lstrip = get_bool(aj, "lstrip", false);
      t.rstrip = get_bool(aj, "rstrip", false);
      t.special = get_bool(aj, "special", false);
      t.normalized = get_bool(aj, "normalized", !t.special);
      t.match = (t.normalized && impl->normalizer) ? impl->normalizer->apply(t.content) : t.content;
      max_id = std::max(max_id, t.id);
      impl->added.push_back(t);
    }
    for (const auto& t : impl->added) {
      impl->added_by_id[t.id] = &t;
      impl->added_by_content[t.content] = t.id;
      (t.normalized ? impl->normalized_matcher : impl->raw_matcher).add(&t);
    }
    impl->size = max_id + 1;
    if (impl->has_post)
      for (const auto& [name, ids] : impl->post.special_ids)
        for (auto id : ids)
          if (id < 0) throw FormatError("post_processor: special token \"" + name + "\" has a negative id");
  } catch (const UnsupportedError& e) {
    throw UnsupportedTokenizerError(prefix + e.what());
  } catch (const FormatError& e) {
    throw ConfigError(prefix + e.what());
  } catch (const Json::exception& e) {
    throw ConfigError(prefix + "unexpected structure: " + e.what());
  }

  // Special tokens: the usual names among the added tokens (and the model's unk), then the post-processor's
  // cls / sep, then tokenizer_config.json and special_tokens_map.json next to the file (the latter wins, as
  // in transformers).
  SpecialTokenIds& sp = impl->specials;
  auto first_of = [&](std::initializer_list<const char*> names) -> std::optional<int64_t> {
    for (const char* n : names)
      if (auto id = impl->find(n)) return id;
    return std::nullopt;
  };
  sp.bos = first_of({"<|begin_of_text|>", "<s>", "[BOS]", "<bos>", "<|startoftext|>", "<|endoftext|>"});
  sp.eos = first_of({"<|end_of_text|>", "</s>", "[EOS]", "<eos>", "<|endoftext|>"});
  sp.pad = first_of({"[PAD]", "<pad>", "<|pad|>", "<|padding|>"});
  sp.unk = first_of({"[UNK]", "<unk>", "<|unk|>"});
  if (auto* wp = dynamic_cast<WordPieceModel*>(impl->model.get()); wp && !sp.unk) sp.unk = impl->find(wp->unk_token);
  if (auto* bpe = dynamic_cast<BpeModel*>(impl->model.get()); bpe && bpe->unk) sp.unk = bpe->unk;
  sp.cls = first_of({"[CLS]"});
  sp.sep = first_of({"[SEP]"});
  sp.mask = first_of({"[MASK]", "<mask>"});
  if (impl->post.cls) sp.cls = impl->post.cls->second;
  if (impl->post.sep) sp.sep = impl->post.sep->second;
  fs::path dir = fs::path(path).parent_path();
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    fs::path f = dir / name;
    if (!fs::exists(f)) continue;
    Json cj;
    try {
      std::ifstream cfg_in(f);
      cj = Json::parse(cfg_in);
    } catch (const Json::parse_error& e) {
      throw ConfigError(where + ": " + f.string() + ": malformed JSON: " + e.what());
    }
    if (!cj.is_object()) continue;
    std::pair<const char*, std::optional<int64_t>*> keys[] = {{"bos_token", &sp.bos}, {"eos_token", &sp.eos},
                                                              {"pad_token", &sp.pad}, {"unk_token", &sp.unk},
                                                              {"cls_token", &sp.cls}, {"sep_token", &sp.sep},
                                                              {"mask_token", &sp.mask}};
    for (auto& [key, slot] : keys) {
      if (!cj.contains(key)) continue;
      if (cj.at(key).is_null()) {
        *slot = std::nullopt;
        continue;
      }
      auto content = token_content(cj.at(key));
      if (!content) continue;
      auto id = impl->find(*content);
      if (!id) throw ConfigError(where + ": " + f.string() + ": " + key + " \"" + *content + "\" is not a token of " + path);
      *slot = id;
    }
  }
  return std::make_shared<HfTokenizer>(impl);
}

int64_t HfTokenizer::vocab_size() const { return impl_->size; }

std::vector<int64_t> HfTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  try {
    impl_->encode_into(text, ids);
  } catch (const Error&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(std::string("tokenizer: ") + e.what());
  }
  return ids;
}

std::vector<std::string> HfTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (auto id : encode(text)) out.push_back(id_to_token(id));
  return out;
}

std::optional<int64_t> HfTokenizer::token_to_id(const std::string& token) const { return impl_->find(token); }

std::string HfTokenizer::id_to_token(int64_t id) const {
  auto it = impl_->added_by_id.find(id);
  if (it != impl_->added_by_id.end()) return it->second->content;
  const auto& tokens = impl_->model->tokens;
  return (id >= 0 && static_cast<std::size_t>(id) < tokens.size()) ? tokens[static_cast<std::size_t>(id)] : std::string();
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (auto id : ids) {
    auto it = impl_->added_by_id.find(id);
    if (it != impl_->added_by_id.end()) {
      if (!(skip_special_tokens && it->second->special)) tokens.push_back(it->second->content);
      continue;
    }
    std::string t = id_to_token(id);
    if (!t.empty()) tokens.push_back(t);
  }
  if (impl_->decoder) tokens = impl_->decoder->apply(std::move(tokens));
  else {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

Encoding HfTokenizer::encode_for_model(const std::string& text, const std::string* text_pair, int64_t max_length) const {
  std::vector<int64_t> a = encode(text), b;
  bool is_pair = text_pair != nullptr;
  if (is_pair) b = encode(*text_pair);
  if (max_length > 0) {
    int64_t budget = max_length - static_cast<int64_t>(impl_->has_post ? impl_->post.added(is_pair) : 0);
    std::size_t limit = static_cast<std::size_t>(std::max<int64_t>(budget, 0));
    truncate_longest_first(a, b, is_pair, limit);
  }
  Encoding e;
  auto push = [&](const std::vector<int64_t>& ids, int64_t type_id, int64_t special) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
    e.token_type_ids.insert(e.token_type_ids.end(), ids.size(), type_id);
    e.special_tokens_mask.insert(e.special_tokens_mask.end(), ids.size(), special);
  };
  if (!impl_->has_post) {
    push(a, 0, 0);
    if (is_pair) push(b, 1, 0);
    return e;
  }
  for (const auto& p : is_pair ? impl_->post.pair : impl_->post.single) {
    if (p.special) push(impl_->post.special_ids.at(p.name), p.type_id, 1);
    else push(p.name == "A" ? a : b, p.type_id, 0);
  }
  return e;
}

SpecialTokenIds HfTokenizer::special_tokens() const { return impl_->specials; }

}  // namespace hftrain
