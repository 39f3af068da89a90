// RLE / bit-packed hybrid decoding and LSB-first bit unpacking (see rle_hybrid.h).
#include "columnar/rle_hybrid.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace hftrain {

void unpack_bits(Bytes bits, int bit_width, std::size_t count, std::vector<uint64_t>& out) {
  if (bit_width < 0 || bit_width > 64) throw ConfigError("bit width " + std::to_string(bit_width) + " outside 0..64");
  const uint64_t needed_bits = static_cast<uint64_t>(bit_width) * count;
  if ((needed_bits + 7) / 8 > bits.size)
    throw ConfigError("bit-packed values run past the end of the page (" + std::to_string(count) + " values of " +
                      std::to_string(bit_width) + " bits, " + std::to_string(bits.size) + " bytes)");
  uint64_t at = 0;  // bit position
  for (std::size_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    int got = 0;
    while (got < bit_width) {
      const uint64_t byte = bits.data[at >> 3];
      const int offset = static_cast<int>(at & 7);
      const int take = std::min(8 - offset, bit_width - got);
      v |= ((byte >> offset) & ((1u << take) - 1)) << got;
      got += take;
      at += static_cast<uint64_t>(take);
    }
    out.push_back(v);
  }
}

void decode_rle_hybrid(ByteCursor& in, int bit_width, std::size_t count, std::vector<uint32_t>& out) {
  if (bit_width < 0 || bit_width > 32) in.fail("RLE bit width " + std::to_string(bit_width) + " outside 0..32");
  out.clear();
  out.reserve(std::min<std::size_t>(count, in.remaining() * 8 + 64));
  const std::size_t value_bytes = static_cast<std::size_t>((bit_width + 7) / 8);
  std::vector<uint64_t> unpacked;
  while (out.size() < count) {
    const uint64_t header = in.uleb128();
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
      const uint64_t groups = header >> 1;
      if (groups == 0 || groups > in.remaining() + 1) in.fail("a bit-packed run of " + std::to_string(groups) + " groups");
      const std::size_t values = static_cast<std::size_t>(groups * 8);
      const std::size_t bytes = static_cast<std::size_t>(groups) * static_cast<std::size_t>(bit_width);
      // The last run of a page may be cut short by the writer after its last value.
      Bytes packed = in.take(std::min(bytes, in.remaining()));
      const std::size_t want = std::min(values, count - out.size());
      if (static_cast<uint64_t>(bit_width) * want > packed.size * 8) in.fail("a bit-packed run runs past the end of the data");
      unpacked.clear();
      unpack_bits(packed, bit_width, want, unpacked);
      for (uint64_t v : unpacked) out.push_back(static_cast<uint32_t>(v));
    } else {  // RLE: (header >> 1) repeats of one value
      const uint64_t repeats = header >> 1;
      if (repeats == 0) in.fail("an RLE run of length 0");
      Bytes vb = in.take(value_bytes);
      uint32_t v = 0;
      for (std::size_t k = 0; k < value_bytes; ++k) v |= static_cast<uint32_t>(vb.data[k]) << (8 * k);
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(repeats, count - out.size()));
      out.insert(out.end(), n, v);
    }
  }
}

int bit_width_for(uint32_t max_value) {
  int w = 0;
  while (w < 32 && (max_value >> w) != 0) ++w;
  return w;
}

}  // namespace hftrain
