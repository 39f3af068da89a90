// Parquet value decoders (see parquet_values.h; Encodings.md of apache/parquet-format).
#include "columnar/parquet_values.h"

#include <cstring>
#include <string>

#include "columnar/rle_hybrid.h"
#include "util/error.h"
#include "util/utf8.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;

Json integer_json(int64_t v, ValueKind kind) {
  switch (kind) {
    case ValueKind::kUInt32: return Json(static_cast<uint32_t>(v));
    case ValueKind::kUInt64: return Json(static_cast<uint64_t>(v));
    case ValueKind::kNull: return Json(nullptr);
    default: return Json(v);
  }
}

Json bytes_json(Bytes b, ValueKind kind) {
  std::string s(reinterpret_cast<const char*>(b.data), b.size);
  if (kind == ValueKind::kNull) return Json(nullptr);
  if (const int64_t bad = first_bad_utf8(s); bad >= 0)
    throw ConfigError("a string value is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return Json(std::move(s));
}

void decode_plain(ByteCursor& in, const LeafType& t, std::size_t count, JsonValues& out) {
  switch (t.physical) {
    case PhysicalType::kBoolean: {
      std::vector<uint64_t> bits;
      unpack_bits(in.take((count + 7) / 8), 1, count, bits);
      for (uint64_t b : bits) out.emplace_back(t.kind == ValueKind::kNull ? Json(nullptr) : Json(b != 0));
      return;
    }
    case PhysicalType::kInt32:
      for (std::size_t i = 0; i < count; ++i) out.push_back(integer_json(static_cast<int32_t>(in.le32()), t.kind));
      return;
    case PhysicalType::kInt64:
      for (std::size_t i = 0; i < count; ++i) out.push_back(integer_json(static_cast<int64_t>(in.le64()), t.kind));
      return;
    case PhysicalType::kFloat:
      for (std::size_t i = 0; i < count; ++i) {
        const uint32_t bits = in.le32();
        float f = 0;
        std::memcpy(&f, &bits, sizeof f);
        out.emplace_back(t.kind == ValueKind::kNull ? Json(nullptr) : Json(static_cast<double>(f)));
      }
      return;
    case PhysicalType::kDouble:
      for (std::size_t i = 0; i < count; ++i) {
        const double d = in.le_double();
        out.emplace_back(t.kind == ValueKind::kNull ? Json(nullptr) : Json(d));
      }
      return;
    case PhysicalType::kByteArray:
      for (std::size_t i = 0; i < count; ++i) out.push_back(bytes_json(in.take(in.le32()), t.kind));
      return;
    case PhysicalType::kFixed:
      if (t.type_length < 0) in.fail("a negative FIXED_LEN_BYTE_ARRAY length");
      for (std::size_t i = 0; i < count; ++i) out.push_back(bytes_json(in.take(static_cast<std::size_t>(t.type_length)), t.kind));
      return;
    case PhysicalType::kInt96: break;
  }
  in.fail("INT96 values are not read");
}

void decode_dictionary_indices(ByteCursor& in, std::size_t count, const JsonValues* dictionary, JsonValues& out) {
  if (!dictionary) in.fail("dictionary-encoded values without a dictionary page");
  const int width = in.u8();
  std::vector<uint32_t> indices;
  decode_rle_hybrid(in, width, count, indices);
  for (uint32_t k : indices) {
    if (k >= dictionary->size())
      in.fail("dictionary index " + std::to_string(k) + " past the dictionary's " + std::to_string(dictionary->size()) + " entries");
    out.push_back((*dictionary)[k]);
  }
}

std::vector<std::string> delta_length_strings(ByteCursor& in) {
  std::vector<int64_t> lengths;
  decode_delta_binary_packed(in, lengths);
  std::vector<std::string> out;
  out.reserve(lengths.size());
  for (int64_t n : lengths) {
    if (n < 0) in.fail("a negative DELTA_LENGTH_BYTE_ARRAY length");
    Bytes b = in.take(static_cast<std::size_t>(n));
    out.emplace_back(reinterpret_cast<const char*>(b.data), b.size);
  }
  return out;
}

void append_strings(const std::vector<std::string>& values, std::size_t count, ByteCursor& in, const LeafType& t,
                    JsonValues& out) {
  if (values.size() < count) in.fail("the page holds " + std::to_string(values.size()) + " values, " + std::to_string(count) + " expected");
  for (std::size_t i = 0; i < count; ++i)
    out.push_back(bytes_json(Bytes(reinterpret_cast<const uint8_t*>(values[i].data()), values[i].size()), t.kind));
}

}  // namespace

void decode_delta_binary_packed(ByteCursor& in, std::vector<int64_t>& out) {
  const uint64_t block_size = in.uleb128();
  const uint64_t miniblocks = in.uleb128();
  const uint64_t total = in.uleb128();
  uint64_t value = static_cast<uint64_t>(in.zigzag());
  if (block_size == 0 || block_size % 128 != 0 || miniblocks == 0 || block_size % miniblocks != 0 ||
      (block_size / miniblocks) % 32 != 0)
    in.fail("a DELTA_BINARY_PACKED header with block size " + std::to_string(block_size) + " and " +
            std::to_string(miniblocks) + " miniblocks");
  if (total > in.remaining() * 8 + 1) in.fail("a DELTA_BINARY_PACKED run claims " + std::to_string(total) + " values");
  const uint64_t per_mini = block_size / miniblocks;
  if (total > 0) out.push_back(static_cast<int64_t>(value));
  uint64_t done = total > 0 ? 1 : 0;
  std::vector<uint64_t> deltas;
  while (done < total) {
    const uint64_t min_delta = static_cast<uint64_t>(in.zigzag());
    Bytes widths = in.take(static_cast<std::size_t>(miniblocks));
    for (uint64_t m = 0; m < miniblocks && done < total; ++m) {
      const int width = widths.data[m];
      if (width > 64) in.fail("a miniblock bit width of " + std::to_string(width));
      deltas.clear();
      const std::size_t bytes = static_cast<std::size_t>(per_mini * static_cast<uint64_t>(width) / 8);
      unpack_bits(in.take(bytes), width, static_cast<std::size_t>(per_mini), deltas);
      for (std::size_t i = 0; i < deltas.size() && done < total; ++i, ++done) {
        value += min_delta + deltas[i];  // wrapping arithmetic, as the spec's
        out.push_back(static_cast<int64_t>(value));
      }
    }
  }
}

void decode_values(int32_t encoding, ByteCursor& in, const LeafType& t, std::size_t count, const JsonValues* dictionary,
                   JsonValues& out) {
  switch (encoding) {
    case 0: decode_plain(in, t, count, out); return;
    case 2:
    case 8: decode_dictionary_indices(in, count, dictionary, out); return;
    case 3: {  // RLE booleans: a 4-byte length, then the hybrid at bit width 1
      if (t.physical != PhysicalType::kBoolean) break;
      ByteCursor runs(in.take(in.le32()), "RLE boolean values");
      std::vector<uint32_t> bits;
      decode_rle_hybrid(runs, 1, count, bits);
      for (uint32_t b : bits) out.emplace_back(t.kind == ValueKind::kNull ? Json(nullptr) : Json(b != 0));
      return;
    }
    case 5: {
      if (t.physical != PhysicalType::kInt32 && t.physical != PhysicalType::kInt64) break;
      std::vector<int64_t> v;
      decode_delta_binary_packed(in, v);
      if (v.size() < count) in.fail("the page holds " + std::to_string(v.size()) + " values, " + std::to_string(count) + " expected");
      for (std::size_t i = 0; i < count; ++i)
        out.push_back(integer_json(t.physical == PhysicalType::kInt32 ? static_cast<int32_t>(v[i]) : v[i], t.kind));
      return;
    }
    case 6:
      if (t.physical != PhysicalType::kByteArray) break;
      append_strings(delta_length_strings(in), count, in, t, out);
      return;
    case 7: {
      if (t.physical != PhysicalType::kByteArray && t.physical != PhysicalType::kFixed) break;
      std::vector<int64_t> prefixes;
      decode_delta_binary_packed(in, prefixes);
      std::vector<std::string> values = delta_length_strings(in);
      if (values.size() != prefixes.size()) in.fail("DELTA_BYTE_ARRAY prefix and suffix counts differ");
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::size_t before = i == 0 ? 0 : values[i - 1].size();
        if (prefixes[i] < 0 || static_cast<std::size_t>(prefixes[i]) > before) in.fail("a DELTA_BYTE_ARRAY prefix longer than the value before it");
        if (prefixes[i] > 0) values[i] = values[i - 1].substr(0, static_cast<std::size_t>(prefixes[i])) + values[i];
      }
      append_strings(values, count, in, t, out);
      return;
    }
    default: break;
  }
  throw ConfigError("values encoded as " + encoding_name(encoding) + " are not read for this column's type (PLAIN, "
                    "RLE_DICTIONARY, PLAIN_DICTIONARY, RLE booleans and the DELTA encodings are)");
}

}  // namespace hftrain
