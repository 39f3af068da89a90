// The Precompiled normalizer of tokenizer.json: sentencepiece's precompiled_charsmap (a Darts double-array trie
// of byte strings whose values point into a blob of NUL-terminated replacements), applied as HF tokenizers does:
// per extended grapheme cluster, a cluster shorter than 6 bytes is replaced as a whole when some prefix of it is
// in the trie (the shortest such prefix's replacement), otherwise each character is looked up alone.
// Grapheme clusters are HF's unicode-segmentation's (uni::grapheme_break: utf8proc's rules with HF's classes).
#include <cstdint>
#include <optional>
#include <vector>

#include "tokenizers/hf_normalizers.h"

namespace hftrain::hf {
namespace {

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int v = value(c);
    if (v < 0) throw FormatError("normalizer Precompiled: precompiled_charsmap is not base64");
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buf >> bits) & 0xFF));
    }
  }
  return out;
}

struct PrecompiledNormalizer : Normalizer {
  std::vector<uint32_t> array;  // the double array
  std::string normalized;       // NUL-separated replacements

  // Darts common_prefix_search; returns the value of the first (shortest) prefix of `key` in the trie.
  std::optional<uint32_t> first_prefix(const char* key, std::size_t n) const {
    auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    if (array.empty()) return std::nullopt;
    std::size_t pos = offset(array[0]);
    for (std::size_t i = 0; i < n; ++i) {
      auto c = static_cast<unsigned char>(key[i]);
      if (c == 0) break;
      pos ^= c;
      if (pos >= array.size()) return std::nullopt;
      uint32_t unit = array[pos];
      if ((unit & ((1u << 31) | 0xFF)) != c) return std::nullopt;
      pos ^= offset(unit);
      if (pos >= array.size()) return std::nullopt;
      if ((unit >> 8) & 1) return array[pos] & ((1u << 31) - 1);
    }
    return std::nullopt;
  }

  std::optional<std::string> transform(const char* key, std::size_t n) const {
    auto v = first_prefix(key, n);
    if (!v || *v > normalized.size()) return std::nullopt;
    std::size_t end = normalized.find('\0', *v);
    return normalized.substr(*v, end == std::string::npos ? std::string::npos : end - *v);
  }

  void apply_cluster(const std::string& s, std::size_t b, std::size_t e, std::string& out) const {
    if (e - b < 6)
      if (auto r = transform(s.data() + b, e - b)) {
        out += *r;
        return;
      }
    for (std::size_t i = b; i < e;) {
      auto len = static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(s[i])));
      if (auto r = transform(s.data() + i, len)) out += *r;
      else out.append(s, i, len);
      i += len;
    }
  }

  std::string apply(const std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    std::size_t cluster = 0, i = 0;
    int32_t state = 0;
    char32_t prev = 0;
    while (i < s.size()) {
      auto len = static_cast<std::size_t>(uni::utf8_length(static_cast<unsigned char>(s[i])));
      char32_t c = uni::code_points(s.substr(i, len)).at(0);
      if (i > 0 && uni::grapheme_break(prev, c, state)) {
        apply_cluster(s, cluster, i, out);
        cluster = i;
      }
      prev = c;
      i += len;
    }
    if (cluster < s.size()) apply_cluster(s, cluster, s.size(), out);
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled(const Json& j) {
  const std::string what = "normalizer Precompiled";
  if (!j.contains("precompiled_charsmap") || !j.at("precompiled_charsmap").is_string())
    throw FormatError(what + ": precompiled_charsmap must be a base64 string");
  std::string blob = base64_decode(j.at("precompiled_charsmap").get<std::string>());
  if (blob.size() < 4) throw FormatError(what + ": precompiled_charsmap is too short to hold its trie size");
  uint32_t trie_bytes = static_cast<uint32_t>(static_cast<unsigned char>(blob[0])) |
                        static_cast<uint32_t>(static_cast<unsigned char>(blob[1])) << 8 |
                        static_cast<uint32_t>(static_cast<unsigned char>(blob[2])) << 16 |
                        static_cast<uint32_t>(static_cast<unsigned char>(blob[3])) << 24;
  std::size_t units = trie_bytes / 4;
  if (blob.size() < 4 + units * 4) throw FormatError(what + ": precompiled_charsmap is shorter than its trie size says");
  auto n = std::make_unique<PrecompiledNormalizer>();
  n->array.resize(units);
  for (std::size_t k = 0; k < units; ++k) {
    const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + 4 + 4 * k);
    n->array[k] = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
                  static_cast<uint32_t>(p[3]) << 24;
  }
  n->normalized = blob.substr(4 + units * 4);
  if (uni::sanitize_utf8(n->normalized) != n->normalized)
    throw FormatError(what + ": the replacements of precompiled_charsmap are not valid UTF-8");
  return n;
}

}  // namespace hftrain::hf
