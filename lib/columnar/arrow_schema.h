// Arrow IPC Schema messages (format/Schema.fbs) as a field tree, and the types hftrain reads: null,
// bool, int8..64 / uint8..64, float32 / float64, utf8 / large_utf8, list / large_list / fixed_size_list,
// struct, and dictionary-encoded fields of these. Any other type is refused naming the column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "columnar/flatbuffer.h"

namespace hftrain {

// Schema.fbs Type union members, by value.
enum class ArrowType : uint8_t {
  kNull = 1, kInt = 2, kFloat = 3, kBinary = 4, kUtf8 = 5, kBool = 6, kList = 12, kStruct = 13,
  kFixedSizeList = 16, kLargeUtf8 = 20, kLargeList = 21
};

struct ArrowField {
  std::string name;
  std::string path;  // dotted from the top-level column
  ArrowType type = ArrowType::kNull;
  int bit_width = 0;      // Int; FloatingPoint: 32 or 64
  bool is_signed = true;  // Int
  int32_t list_size = 0;  // FixedSizeList
  std::vector<ArrowField> children;
  std::optional<int64_t> dictionary_id;  // dictionary-encoded: the values' batch id
  int index_bit_width = 32;
  bool index_signed = true;
};

// The top-level fields of a Schema table. Throws ConfigError naming the column of a type not read.
std::vector<ArrowField> parse_arrow_schema(const FbTable& schema);

}  // namespace hftrain
