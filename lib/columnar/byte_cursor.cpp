// Bounds-checked little-endian reading (see byte_cursor.h).
#include "columnar/byte_cursor.h"

#include <cstring>

#include "util/error.h"

namespace hftrain {

Bytes Bytes::slice(uint64_t offset, uint64_t length, const std::string& what) const {
  if (offset > size || length > size - offset)
    throw ConfigError(what + " lies outside the data (bytes " + std::to_string(offset) + " + " + std::to_string(length) +
                      " of " + std::to_string(size) + "; the file is truncated or corrupt)");
  return Bytes(data + offset, static_cast<std::size_t>(length));
}

uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint64_t load_le64(const uint8_t* p) { return static_cast<uint64_t>(load_le32(p)) | static_cast<uint64_t>(load_le32(p + 4)) << 32; }

void ByteCursor::fail(const std::string& reason) const {
  throw ConfigError(what_ + ": " + reason + " (at byte " + std::to_string(pos_) + " of " + std::to_string(bytes_.size) + ")");
}

void ByteCursor::need(std::size_t n) const {
  if (n > remaining())
    fail("truncated: " + std::to_string(n) + " more bytes needed, " + std::to_string(remaining()) + " left");
}

uint8_t ByteCursor::u8() {
  need(1);
  return bytes_.data[pos_++];
}

uint32_t ByteCursor::le32() {
  need(4);
  const uint32_t v = load_le32(bytes_.data + pos_);
  pos_ += 4;
  return v;
}

uint64_t ByteCursor::le64() {
  need(8);
  const uint64_t v = load_le64(bytes_.data + pos_);
  pos_ += 8;
  return v;
}

double ByteCursor::le_double() {
  const uint64_t bits = le64();
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

uint64_t ByteCursor::uleb128() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = u8();
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail("a varint longer than 10 bytes");
}

int64_t ByteCursor::zigzag() {
  const uint64_t u = uleb128();
  return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
}

Bytes ByteCursor::take(std::size_t n) {
  need(n);
  Bytes b(bytes_.data + pos_, n);
  pos_ += n;
  return b;
}

}  // namespace hftrain
