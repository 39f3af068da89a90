// tokenizer.json decoders (see hf_decoders.h).
#include "tokenizers/hf_decoders.h"

#include <array>
#include <cstdio>
#include <functional>
#include <utility>

namespace hftrain::hf {
namespace {

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

using TokensFn = std::function<std::vector<std::string>(std::vector<std::string>)>;

std::unique_ptr<Decoder> function_decoder(TokensFn fn) { return std::make_unique<FunctionDecoder>(std::move(fn)); }

std::unique_ptr<Decoder> wordpiece_decoder(const Json& j) {
  auto d = std::make_unique<WordPieceDecoder>();
  d->prefix = get_string(j, "prefix", "##");
  d->cleanup = get_bool(j, "cleanup", true);
  return d;
}

std::unique_ptr<Decoder> sequence_decoder(const Json& j) {
  auto d = std::make_unique<SequenceDecoder>();
  for (const auto& s : j.at("decoders"))
    if (auto step = parse_decoder(s)) d->steps.push_back(std::move(step));
  return d;
}

std::unique_ptr<Decoder> replace_decoder(const Json& j) {
  Pattern p = parse_pattern(j.at("pattern"), "decoder Replace");
  std::string content = j.at("content").get<std::string>();
  return function_decoder([p, content](std::vector<std::string> ts) {
    for (auto& t : ts) t = replace_pattern(t, p, content);
    return ts;
  });
}

std::unique_ptr<Decoder> fuse_decoder() {
  return function_decoder([](std::vector<std::string> ts) {
    std::string all;
    for (const auto& t : ts) all += t;
    return std::vector<std::string>{all};
  });
}

std::unique_ptr<Decoder> strip_decoder(const Json& j) {
  std::string content = get_string(j, "content", " ");
  std::size_t start = j.value("start", 0), stop = j.value("stop", 0);
  return function_decoder([content, start, stop](std::vector<std::string> ts) {
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

// <0xXX> tokens become their bytes; a run of bytes that is not valid UTF-8 becomes one U+FFFD per byte (as HF).
std::vector<std::string> fall_back_to_bytes(const std::vector<std::string>& ts) {
  std::vector<std::string> out;
  std::string pending;  // consecutive <0xXX> bytes
  auto flush = [&] {
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
}

std::unique_ptr<Decoder> metaspace_decoder(const Json& j) {
  std::string replacement = get_string(j, "replacement", "\xE2\x96\x81");
  bool strip_first = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>() != "never"
                                                   : get_bool(j, "add_prefix_space", true);
  return function_decoder([replacement, strip_first](std::vector<std::string> ts) {
    for (std::size_t i = 0; i < ts.size(); ++i) {
      replace_all(ts[i], replacement, " ");
      if (i == 0 && strip_first && !ts[i].empty() && ts[i][0] == ' ') ts[i].erase(0, 1);
    }
    return ts;
  });
}

std::unique_ptr<Decoder> bpe_decoder(const Json& j) {
  std::string suffix = get_string(j, "suffix", "</w>");
  return function_decoder([suffix](std::vector<std::string> ts) {
    for (std::size_t i = 0; i < ts.size(); ++i) replace_all(ts[i], suffix, i + 1 == ts.size() ? "" : " ");
    return ts;
  });
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const Json& j) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") return wordpiece_decoder(j);
  if (type == "Sequence") return sequence_decoder(j);
  if (type == "Replace") return replace_decoder(j);
  if (type == "Fuse") return fuse_decoder();
  if (type == "Strip") return strip_decoder(j);
  if (type == "ByteFallback") return function_decoder(fall_back_to_bytes);
  if (type == "Metaspace") return metaspace_decoder(j);
  if (type == "BPEDecoder") return bpe_decoder(j);
  throw UnsupportedError("unsupported decoder type \"" + type + "\"");
}

}  // namespace hftrain::hf
