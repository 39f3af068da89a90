// Bounds-checked reading of little-endian binary data (parquet pages and footers, Arrow IPC messages):
// every read checks the bytes left and throws ConfigError naming what was being read, so a truncated or
// corrupt file is refused, never read past its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

// A view of bytes owned elsewhere.
struct Bytes {
  const uint8_t* data = nullptr;
  std::size_t size = 0;
  Bytes() = default;
  Bytes(const uint8_t* d, std::size_t n) : data(d), size(n) {}
  explicit Bytes(const std::vector<uint8_t>& v) : data(v.data()), size(v.size()) {}
  // Bytes [offset, offset + length); throws ConfigError naming `what` when they lie outside.
  Bytes slice(uint64_t offset, uint64_t length, const std::string& what) const;
};

class ByteCursor {
 public:
  ByteCursor(Bytes bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return bytes_.size - pos_; }
  bool at_end() const { return pos_ == bytes_.size; }

  uint8_t u8();
  uint32_t le32();
  uint64_t le64();
  double le_double();
  uint64_t uleb128();  // unsigned LEB128 varint (thrift compact, parquet RLE / delta headers)
  int64_t zigzag();    // zigzag-encoded varint
  Bytes take(std::size_t n);
  void skip(std::size_t n) { take(n); }
  [[noreturn]] void fail(const std::string& reason) const;

 private:
  void need(std::size_t n) const;
  Bytes bytes_;
  std::size_t pos_ = 0;
  std::string what_;
};

// Little-endian loads from a pointer known to be in bounds.
uint32_t load_le32(const uint8_t* p);
uint64_t load_le64(const uint8_t* p);

}  // namespace hftrain
