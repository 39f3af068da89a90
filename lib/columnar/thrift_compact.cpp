// Thrift compact protocol reader (see thrift_compact.h).
#include "columnar/thrift_compact.h"

namespace hftrain {
namespace {
constexpr int kMaxDepth = 64;
}

void ThriftReader::read_struct(const std::function<void(int16_t, ThriftType)>& on_field) {
  if (++depth_ > kMaxDepth) in_.fail("thrift structs nested more than 64 deep");
  int16_t last = 0;
  for (;;) {
    const uint8_t head = in_.u8();
    const auto type = static_cast<ThriftType>(head & 0x0F);
    if (type == ThriftType::kStop) break;
    if (static_cast<uint8_t>(type) > 12) in_.fail("unknown thrift wire type " + std::to_string(head & 0x0F));
    const int delta = head >> 4;
    const int16_t id = delta != 0 ? static_cast<int16_t>(last + delta) : static_cast<int16_t>(in_.zigzag());
    last = id;
    on_field(id, type);
  }
  --depth_;
}

int32_t ThriftReader::read_i32() {
  const int64_t v = in_.zigzag();
  if (v < INT32_MIN || v > INT32_MAX) in_.fail("a thrift i32 out of range");
  return static_cast<int32_t>(v);
}

int64_t ThriftReader::read_i64() { return in_.zigzag(); }

std::string ThriftReader::read_string() {
  const uint64_t n = in_.uleb128();
  if (n > in_.remaining()) in_.fail("a thrift string of " + std::to_string(n) + " bytes runs past the end");
  Bytes b = in_.take(static_cast<std::size_t>(n));
  return std::string(reinterpret_cast<const char*>(b.data), b.size);
}

void ThriftReader::read_list_header(ThriftType& element, uint32_t& count) {
  const uint8_t head = in_.u8();
  element = static_cast<ThriftType>(head & 0x0F);
  uint64_t n = head >> 4;
  if (n == 15) n = in_.uleb128();
  // Every element takes at least one byte, so a count above the bytes left is corrupt.
  if (n > in_.remaining()) in_.fail("a thrift list of " + std::to_string(n) + " elements runs past the end");
  count = static_cast<uint32_t>(n);
}

void ThriftReader::read_list(const std::function<void(ThriftType)>& on_element) {
  ThriftType element{};
  uint32_t count = 0;
  read_list_header(element, count);
  for (uint32_t i = 0; i < count; ++i) on_element(element);
}

void ThriftReader::skip(ThriftType t) { skip_at(t, 0); }

void ThriftReader::skip_at(ThriftType t, int depth) {
  if (depth > kMaxDepth) in_.fail("thrift values nested more than 64 deep");
  switch (t) {
    case ThriftType::kTrue:
    case ThriftType::kFalse: return;  // a field's bool lives in its type; a list's takes one byte (see below)
    case ThriftType::kByte: in_.u8(); return;
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: in_.uleb128(); return;
    case ThriftType::kDouble: in_.skip(8); return;
    case ThriftType::kBinary: read_string(); return;
    case ThriftType::kList:
    case ThriftType::kSet: {
      ThriftType element{};
      uint32_t count = 0;
      read_list_header(element, count);
      for (uint32_t i = 0; i < count; ++i) {
        if (element == ThriftType::kTrue || element == ThriftType::kFalse) in_.u8();
        else skip_at(element, depth + 1);
      }
      return;
    }
    case ThriftType::kMap: {
      const uint64_t n = in_.uleb128();
      if (n == 0) return;
      if (n > in_.remaining()) in_.fail("a thrift map runs past the end");
      const uint8_t kv = in_.u8();
      for (uint64_t i = 0; i < n; ++i) {
        for (auto part : {static_cast<ThriftType>(kv >> 4), static_cast<ThriftType>(kv & 0x0F)}) {
          if (part == ThriftType::kTrue || part == ThriftType::kFalse) in_.u8();
          else skip_at(part, depth + 1);
        }
      }
      return;
    }
    case ThriftType::kStruct:
      read_struct([&](int16_t, ThriftType ft) { skip_at(ft, depth + 1); });
      return;
    case ThriftType::kStop: break;
  }
  in_.fail("unknown thrift wire type " + std::to_string(static_cast<int>(t)));
}

}  // namespace hftrain
