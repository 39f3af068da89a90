// UTF-8 well-formedness (see utf8.h).
#include "util/utf8.h"

namespace hftrain {

int64_t first_bad_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    std::size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return static_cast<int64_t>(i);
    if (i + len > n) return static_cast<int64_t>(i);
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

}  // namespace hftrain
