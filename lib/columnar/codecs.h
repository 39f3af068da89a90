// Decompression of parquet pages and Arrow IPC buffers: UNCOMPRESSED, SNAPPY (raw snappy), GZIP (gzip or
// zlib stream) and ZSTD; any other codec is refused by name. The decompressed size is known in advance
// (parquet's uncompressed_page_size, Arrow's length prefix) and a different one is an error.
#pragma once

#include <string>
#include <vector>

#include "columnar/byte_cursor.h"

namespace hftrain {

enum class Codec { kUncompressed, kSnappy, kGzip, kZstd };

// Parquet's CompressionCodec enum value as a Codec; throws ConfigError naming any other codec.
Codec parquet_codec(int32_t value);

// `in` decompressed into exactly `expected_size` bytes; throws ConfigError when the data is corrupt or its
// size differs.
std::vector<uint8_t> decompress(Codec codec, Bytes in, std::size_t expected_size);

}  // namespace hftrain
