// UTF-8 well-formedness, shared by the text row readers (data/) and the columnar readers (columnar/).
#pragma once

#include <cstdint>
#include <string_view>

namespace hftrain {

// Byte offset of the first malformed UTF-8 sequence in `s` (a bad lead or continuation byte, a truncated
// sequence, an overlong form, a surrogate or a code point above U+10FFFF), or -1 when `s` is well-formed.
int64_t first_bad_utf8(std::string_view s);

}  // namespace hftrain
