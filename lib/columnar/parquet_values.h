// Parquet value encodings into JSON values: PLAIN (every physical type but INT96), RLE_DICTIONARY /
// PLAIN_DICTIONARY indices into a dictionary page, RLE booleans, DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY; any other encoding is refused by name.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "columnar/byte_cursor.h"
#include "columnar/parquet_metadata.h"

namespace hftrain {

// What a leaf's values become in JSON (from its physical and logical type).
enum class ValueKind { kBool, kInt, kUInt32, kUInt64, kFloat, kString, kNull };

struct LeafType {
  PhysicalType physical = PhysicalType::kInt32;
  int32_t type_length = 0;  // FIXED_LEN_BYTE_ARRAY
  ValueKind kind = ValueKind::kInt;
};

using JsonValues = std::vector<nlohmann::ordered_json>;

// Appends `count` values of `encoding` read from `in` to `out`. `dictionary`: the column chunk's dictionary
// page values (nullptr when it has none). Throws ConfigError on a refused encoding or corrupt data.
void decode_values(int32_t encoding, ByteCursor& in, const LeafType& type, std::size_t count,
                   const JsonValues* dictionary, JsonValues& out);

// DELTA_BINARY_PACKED: appends the values of one encoded run (its header says how many) to `out`.
void decode_delta_binary_packed(ByteCursor& in, std::vector<int64_t>& out);

}  // namespace hftrain
