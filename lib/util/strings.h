// String predicates shared by every layer (C++17's std::string has no starts_with / ends_with).
#pragma once

#include <string_view>

namespace hftrain {

inline bool starts_with(std::string_view s, std::string_view head) { return s.substr(0, head.size()) == head; }

inline bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace hftrain
