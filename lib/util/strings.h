// String helpers shared by every layer: predicates (C++17's std::string has no starts_with / ends_with) and
// the byte vectors of the rendezvous stores as text and back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hftrain {

inline bool starts_with(std::string_view s, std::string_view head) { return s.substr(0, head.size()) == head; }

inline bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

inline std::string to_text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

inline std::vector<uint8_t> to_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

}  // namespace hftrain
