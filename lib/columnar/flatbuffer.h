// A minimal, bounds-checked flatbuffers reader: tables through their vtables, scalars, strings, vectors of
// tables and of structs (what Arrow's Message, Schema and RecordBatch tables use). Every offset is checked
// against the buffer; a bad one throws ConfigError.
#pragma once

#include <cstdint>
#include <string>

#include "columnar/byte_cursor.h"

namespace hftrain {

class FbTable {
 public:
  // The root table of a flatbuffer.
  static FbTable root(Bytes buf);
  bool has(int slot) const { return field(slot) != 0; }
  uint8_t u8(int slot, uint8_t dflt = 0) const;
  int16_t i16(int slot, int16_t dflt = 0) const;
  int32_t i32(int slot, int32_t dflt = 0) const;
  int64_t i64(int slot, int64_t dflt = 0) const;
  bool boolean(int slot, bool dflt = false) const { return u8(slot, dflt ? 1 : 0) != 0; }
  std::string string(int slot) const;
  FbTable table(int slot) const;  // throws when absent
  // A vector field: its element count and the position of its first element (0 / 0 when absent).
  uint32_t vector_size(int slot) const;
  std::size_t vector_data(int slot) const;
  FbTable table_at(int slot, uint32_t i) const;  // element i of a vector of tables
  Bytes buffer() const { return buf_; }

 private:
  FbTable(Bytes buf, std::size_t pos);
  std::size_t field(int slot) const;  // absolute position of the field, 0 when absent
  std::size_t deref(std::size_t at) const;  // follows the uoffset stored at `at`
  std::size_t checked(std::size_t at, std::size_t n) const;
  Bytes buf_;
  std::size_t pos_ = 0, vtable_ = 0, vtable_size_ = 0;
};

}  // namespace hftrain
