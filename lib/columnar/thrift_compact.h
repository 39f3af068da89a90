// A hand-written reader of Thrift's compact protocol, only what parquet's footer (FileMetaData) and page
// headers need: struct fields by id, i32 / i64 zigzag varints, binary / string, lists, bools; every other
// field is skipped by its wire type, nested at most 64 deep. Errors throw ConfigError through ByteCursor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "columnar/byte_cursor.h"

namespace hftrain {

// Compact protocol wire types.
enum class ThriftType : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12
};

class ThriftReader {
 public:
  explicit ThriftReader(ByteCursor& in) : in_(in) {}
  // Reads one struct: calls on_field(id, type) for each field, which must consume the value (read_* or skip).
  void read_struct(const std::function<void(int16_t, ThriftType)>& on_field);
  int32_t read_i32();
  int64_t read_i64();
  std::string read_string();
  // A field's bool: its value is the field's wire type.
  static bool field_bool(ThriftType t) { return t == ThriftType::kTrue; }
  // A list's header: the element type and the count (checked against the bytes left).
  void read_list_header(ThriftType& element, uint32_t& count);
  // Calls on_element(type) `count` times for the list that follows.
  void read_list(const std::function<void(ThriftType)>& on_element);
  void skip(ThriftType t);
  ByteCursor& cursor() { return in_; }

 private:
  void skip_at(ThriftType t, int depth);
  ByteCursor& in_;
  int depth_ = 0;
};

}  // namespace hftrain
