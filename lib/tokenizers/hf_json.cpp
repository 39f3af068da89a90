// Shared pieces of the tokenizer.json reader (see hf_json.h).
#include "tokenizers/hf_json.h"

namespace hftrain::hf {

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

std::vector<std::pair<std::size_t, std::size_t>> Pattern::find_all(const std::string& s) const {
  if (regex) return regex->find_all(s);
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (literal.empty()) return out;
  for (std::size_t pos = s.find(literal); pos != std::string::npos; pos = s.find(literal, pos + literal.size()))
    out.emplace_back(pos, pos + literal.size());
  return out;
}

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

}  // namespace hftrain::hf
