// Page and buffer decompression through libsnappy, zlib and libzstd (see codecs.h).
#include "columnar/codecs.h"

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>

#include "util/error.h"

namespace hftrain {
namespace {

// Refuse sizes no page could have before allocating them (a corrupt header must not allocate gigabytes).
constexpr std::size_t kMaxDecompressed = std::size_t{1} << 31;

std::vector<uint8_t> inflate_gzip(Bytes in, std::size_t expected) {
  std::vector<uint8_t> out(expected);
  z_stream z{};
  if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) throw ConfigError("gzip: cannot initialise zlib");
  z.next_in = const_cast<Bytef*>(in.data);
  z.avail_in = static_cast<uInt>(in.size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    rc = inflate(&z, Z_FINISH);
    // A member ended with input left: pyarrow never writes several gzip members, but the format allows them.
    if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) rc = inflateReset(&z);
  }
  const std::size_t produced = expected - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && z.avail_in == 0 && produced == expected))
    throw ConfigError("gzip: corrupt compressed data (zlib " + std::to_string(rc) + ")");
  if (produced != expected)
    throw ConfigError("gzip: decompressed to " + std::to_string(produced) + " bytes, the header says " +
                      std::to_string(expected));
  return out;
}

}  // namespace

Codec parquet_codec(int32_t value) {
  switch (value) {
    case 0: return Codec::kUncompressed;
    case 1: return Codec::kSnappy;
    case 2: return Codec::kGzip;
    case 6: return Codec::kZstd;
    case 3: throw ConfigError("compression codec LZO is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)");
    case 4: throw ConfigError("compression codec BROTLI is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)");
    case 5:
    case 7: throw ConfigError("compression codec LZ4 is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)");
    default: throw ConfigError("unknown compression codec " + std::to_string(value));
  }
}

std::vector<uint8_t> decompress(Codec codec, Bytes in, std::size_t expected) {
  if (expected > kMaxDecompressed)
    throw ConfigError("a compressed block claims " + std::to_string(expected) + " bytes, more than 2 GiB");
  switch (codec) {
    case Codec::kUncompressed: {
      if (in.size != expected)
        throw ConfigError("an uncompressed block holds " + std::to_string(in.size) + " bytes, the header says " +
                          std::to_string(expected));
      return std::vector<uint8_t>(in.data, in.data + in.size);
    }
    case Codec::kSnappy: {
      std::size_t length = 0;
      const auto* src = reinterpret_cast<const char*>(in.data);
      if (snappy_uncompressed_length(src, in.size, &length) != SNAPPY_OK || length != expected)
        throw ConfigError("snappy: corrupt compressed data or a size other than the header's " + std::to_string(expected));
      std::vector<uint8_t> out(expected);
      if (snappy_uncompress(src, in.size, reinterpret_cast<char*>(out.data()), &length) != SNAPPY_OK || length != expected)
        throw ConfigError("snappy: corrupt compressed data");
      return out;
    }
    case Codec::kGzip: return inflate_gzip(in, expected);
    case Codec::kZstd: {
      std::vector<uint8_t> out(expected);
      const std::size_t n = ZSTD_decompress(out.data(), out.size(), in.data, in.size);
      if (ZSTD_isError(n)) throw ConfigError(std::string("zstd: ") + ZSTD_getErrorName(n));
      if (n != expected)
        throw ConfigError("zstd: decompressed to " + std::to_string(n) + " bytes, the header says " + std::to_string(expected));
      return out;
    }
  }
  throw ConfigError("unknown codec");
}

}  // namespace hftrain
