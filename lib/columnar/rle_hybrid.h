// Parquet's RLE / bit-packed hybrid (Encodings.md): repetition and definition levels, dictionary indices
// and RLE booleans; and the little-endian bit unpacking it and DELTA_BINARY_PACKED share.
#pragma once

#include <cstdint>
#include <vector>

#include "columnar/byte_cursor.h"

namespace hftrain {

// `count` values of `bit_width` bits (0..64), packed LSB first from `bits`, appended to `out` as unsigned.
// Throws ConfigError when `bits` is too short.
void unpack_bits(Bytes bits, int bit_width, std::size_t count, std::vector<uint64_t>& out);

// Decodes `count` values of the hybrid from `in` (runs without a length prefix; `bit_width` 0..32) into
// `out` (cleared first). Throws ConfigError when the runs end early or run past the data.
void decode_rle_hybrid(ByteCursor& in, int bit_width, std::size_t count, std::vector<uint32_t>& out);

// Bits needed for values 0..max_value.
int bit_width_for(uint32_t max_value);

}  // namespace hftrain
