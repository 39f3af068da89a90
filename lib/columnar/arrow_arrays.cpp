// Arrow record batch arrays into JSON values (see arrow_arrays.h; Columnar.md's layouts).
#include "columnar/arrow_arrays.h"

#include <cstring>
#include <string>

#include "columnar/codecs.h"
#include "util/error.h"
#include "util/utf8.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;
constexpr int64_t kMaxLength = int64_t{1} << 27;

// Element i of a little-endian integer buffer of `bits` width.
int64_t int_at(Bytes b, int64_t i, int bits, bool is_signed) {
  const uint8_t* p = b.data + static_cast<std::size_t>(i) * static_cast<std::size_t>(bits / 8);
  switch (bits) {
    case 8: return is_signed ? static_cast<int8_t>(p[0]) : p[0];
    case 16: {
      const auto u = static_cast<uint16_t>(p[0] | p[1] << 8);
      return is_signed ? static_cast<int16_t>(u) : u;
    }
    case 32: return is_signed ? static_cast<int64_t>(static_cast<int32_t>(load_le32(p))) : load_le32(p);
    default: return static_cast<int64_t>(load_le64(p));
  }
}

void need_bytes(Bytes b, int64_t n, const char* what) {
  if (n < 0 || static_cast<uint64_t>(n) > b.size)
    throw ConfigError(std::string(what) + " buffer holds " + std::to_string(b.size) + " bytes, " + std::to_string(n) + " needed");
}

// Offsets [0, length] of a string or list array, checked to rise and to stay within `limit`.
std::vector<int64_t> read_offsets(Bytes b, int64_t length, bool large, int64_t limit) {
  const int width = large ? 64 : 32;
  need_bytes(b, (length + 1) * (width / 8), "an offsets");
  std::vector<int64_t> off(static_cast<std::size_t>(length + 1));
  for (int64_t i = 0; i <= length; ++i) {
    off[static_cast<std::size_t>(i)] = int_at(b, i, width, true);
    if (off[static_cast<std::size_t>(i)] < 0 || off[static_cast<std::size_t>(i)] > limit ||
        (i > 0 && off[static_cast<std::size_t>(i)] < off[static_cast<std::size_t>(i - 1)]))
      throw ConfigError("offset " + std::to_string(i) + " (" + std::to_string(off[static_cast<std::size_t>(i)]) +
                        ") is out of order or past the data's " + std::to_string(limit));
  }
  return off;
}

}  // namespace

RecordBatchReader::RecordBatchReader(const FbTable& batch, Bytes body) : body_(body) {
  length_ = batch.i64(0);
  if (length_ < 0 || length_ > kMaxLength) throw ConfigError("a record batch of " + std::to_string(length_) + " rows");
  node_count_ = batch.vector_size(1);
  buffer_count_ = batch.vector_size(2);
  nodes_ = batch.buffer().slice(batch.vector_data(1), uint64_t{16} * node_count_, "the record batch's nodes");
  buffers_ = batch.buffer().slice(batch.vector_data(2), uint64_t{16} * buffer_count_, "the record batch's buffers");
  if (batch.has(3)) {  // BodyCompression: codec 0 (LZ4_FRAME 0, ZSTD 1), method 1 (BUFFER 0)
    const FbTable c = batch.table(3);
    if (c.u8(0) != 1) throw ConfigError("LZ4_FRAME-compressed record batches are not read (uncompressed and ZSTD are)");
    if (c.u8(1) != 0) throw ConfigError("an unknown body compression method");
    zstd_ = true;
  }
}

RecordBatchReader::Node RecordBatchReader::next_node() {
  if (next_node_ >= node_count_) throw ConfigError("the record batch has fewer field nodes than the schema's fields");
  const uint8_t* p = nodes_.data + 16 * static_cast<std::size_t>(next_node_++);
  Node n{static_cast<int64_t>(load_le64(p)), static_cast<int64_t>(load_le64(p + 8))};
  if (n.length < 0 || n.length > kMaxLength || n.null_count < 0 || n.null_count > n.length)
    throw ConfigError("a field node of length " + std::to_string(n.length) + " with " + std::to_string(n.null_count) + " nulls");
  return n;
}

Bytes RecordBatchReader::next_buffer() {
  if (next_buffer_ >= buffer_count_) throw ConfigError("the record batch has fewer buffers than the schema needs");
  const uint8_t* p = buffers_.data + 16 * static_cast<std::size_t>(next_buffer_++);
  Bytes b = body_.slice(load_le64(p), load_le64(p + 8), "buffer " + std::to_string(next_buffer_ - 1));
  if (!zstd_ || b.size == 0) return b;
  if (b.size < 8) throw ConfigError("a compressed buffer shorter than its length prefix");
  const auto raw_length = static_cast<int64_t>(load_le64(b.data));
  Bytes payload(b.data + 8, b.size - 8);
  if (raw_length == -1) return payload;  // stored uncompressed
  if (raw_length < 0) throw ConfigError("a compressed buffer with a negative length");
  decompressed_.push_back(decompress(Codec::kZstd, payload, static_cast<std::size_t>(raw_length)));
  return Bytes(decompressed_.back());
}

ArrowValues RecordBatchReader::read_column(const ArrowField& field, const ArrowDictionaries& dictionaries) {
  ArrowValues v = read_array(field, dictionaries, 0);
  if (static_cast<int64_t>(v.size()) != length_)
    throw ConfigError("the column holds " + std::to_string(v.size()) + " values for the batch's " + std::to_string(length_) + " rows");
  return v;
}

ArrowValues RecordBatchReader::read_array(const ArrowField& f, const ArrowDictionaries& dicts, int depth) {
  const Node node = next_node();
  std::vector<bool> valid(static_cast<std::size_t>(node.length), true);
  if (f.type == ArrowType::kNull) return ArrowValues(static_cast<std::size_t>(node.length), Json(nullptr));
  const Bytes bitmap = next_buffer();
  if (bitmap.size == 0 && node.null_count > 0) throw ConfigError("nulls counted but no validity bitmap");
  if (bitmap.size > 0) {
    need_bytes(bitmap, (node.length + 7) / 8, "a validity");
    for (int64_t i = 0; i < node.length; ++i) valid[static_cast<std::size_t>(i)] = (bitmap.data[i >> 3] >> (i & 7)) & 1;
  }
  ArrowValues out;
  out.reserve(static_cast<std::size_t>(node.length));
  if (f.dictionary_id) {
    auto it = dicts.find(*f.dictionary_id);
    if (it == dicts.end()) throw ConfigError("dictionary " + std::to_string(*f.dictionary_id) + " was not sent before its batch");
    const Bytes idx = next_buffer();
    need_bytes(idx, node.length * (f.index_bit_width / 8), "a dictionary index");
    for (int64_t i = 0; i < node.length; ++i) {
      if (!valid[static_cast<std::size_t>(i)]) { out.emplace_back(nullptr); continue; }
      const int64_t k = int_at(idx, i, f.index_bit_width, f.index_signed);
      if (k < 0 || static_cast<uint64_t>(k) >= it->second.size()) throw ConfigError("a dictionary index past the dictionary");
      out.push_back(it->second[static_cast<std::size_t>(k)]);
    }
    return out;
  }
  if (f.type == ArrowType::kStruct) return read_struct(f, node, valid, dicts, depth);
  if (f.type == ArrowType::kList || f.type == ArrowType::kLargeList || f.type == ArrowType::kFixedSizeList)
    return read_list(f, node, valid, dicts, depth);
  return read_leaf(f, node, valid);
}

ArrowValues RecordBatchReader::read_struct(const ArrowField& f, const Node& node, const std::vector<bool>& valid,
                                           const ArrowDictionaries& dicts, int depth) {
  ArrowValues out;
  std::vector<ArrowValues> kids;
  for (const auto& c : f.children) {
    kids.push_back(read_array(c, dicts, depth + 1));
    if (static_cast<int64_t>(kids.back().size()) < node.length) throw ConfigError("column '" + c.path + "': shorter than its struct");
  }
  for (int64_t i = 0; i < node.length; ++i) {
    if (!valid[static_cast<std::size_t>(i)]) { out.emplace_back(nullptr); continue; }
    Json obj = Json::object();
    for (std::size_t c = 0; c < kids.size(); ++c) obj[f.children[c].name] = std::move(kids[c][static_cast<std::size_t>(i)]);
    out.push_back(std::move(obj));
  }
  return out;
}

ArrowValues RecordBatchReader::read_list(const ArrowField& f, const Node& node, const std::vector<bool>& valid,
                                         const ArrowDictionaries& dicts, int depth) {
  ArrowValues out;
  std::vector<int64_t> off;
  if (f.type != ArrowType::kFixedSizeList) off = read_offsets(next_buffer(), node.length, f.type == ArrowType::kLargeList, kMaxLength);
  const ArrowValues child = read_array(f.children[0], dicts, depth + 1);
  for (int64_t i = 0; i < node.length; ++i) {
    if (!valid[static_cast<std::size_t>(i)]) { out.emplace_back(nullptr); continue; }
    const int64_t a = off.empty() ? i * f.list_size : off[static_cast<std::size_t>(i)];
    const int64_t b = off.empty() ? a + f.list_size : off[static_cast<std::size_t>(i + 1)];
    if (b > static_cast<int64_t>(child.size())) throw ConfigError("column '" + f.path + "': a list runs past its values");
    Json arr = Json::array();
    for (int64_t k = a; k < b; ++k) arr.push_back(child[static_cast<std::size_t>(k)]);
    out.push_back(std::move(arr));
  }
  return out;
}

ArrowValues RecordBatchReader::read_leaf(const ArrowField& f, const Node& node, const std::vector<bool>& valid) {
  ArrowValues out;
  out.reserve(static_cast<std::size_t>(node.length));
  const Bytes data = f.type == ArrowType::kUtf8 || f.type == ArrowType::kLargeUtf8 ? Bytes() : next_buffer();
  std::vector<int64_t> off;
  Bytes chars;
  if (f.type == ArrowType::kUtf8 || f.type == ArrowType::kLargeUtf8) {
    const Bytes offsets = next_buffer();
    chars = next_buffer();
    off = read_offsets(offsets, node.length, f.type == ArrowType::kLargeUtf8, static_cast<int64_t>(chars.size));
  } else if (f.type == ArrowType::kBool) {
    need_bytes(data, (node.length + 7) / 8, "a boolean");
  } else {
    need_bytes(data, node.length * (f.bit_width / 8), f.type == ArrowType::kInt ? "an integer" : "a floating-point");
  }
  for (int64_t i = 0; i < node.length; ++i) {
    if (!valid[static_cast<std::size_t>(i)]) { out.emplace_back(nullptr); continue; }
    switch (f.type) {
      case ArrowType::kBool: out.emplace_back(((data.data[i >> 3] >> (i & 7)) & 1) != 0); break;
      case ArrowType::kInt: {
        const int64_t v = int_at(data, i, f.bit_width, f.is_signed);
        if (!f.is_signed && f.bit_width == 64) out.emplace_back(static_cast<uint64_t>(v));
        else out.emplace_back(v);
        break;
      }
      case ArrowType::kFloat:
        if (f.bit_width == 32) {
          float x = 0;
          std::memcpy(&x, data.data + 4 * i, 4);
          out.emplace_back(static_cast<double>(x));
        } else {
          double x = 0;
          std::memcpy(&x, data.data + 8 * i, 8);
          out.emplace_back(x);
        }
        break;
      default: {
        std::string s(reinterpret_cast<const char*>(chars.data) + off[static_cast<std::size_t>(i)],
                      static_cast<std::size_t>(off[static_cast<std::size_t>(i + 1)] - off[static_cast<std::size_t>(i)]));
        if (const int64_t bad = first_bad_utf8(s); bad >= 0)
          throw ConfigError("row " + std::to_string(i) + ": a string value is not valid UTF-8 (byte " + std::to_string(bad) + ")");
        out.emplace_back(std::move(s));
      }
    }
  }
  return out;
}

}  // namespace hftrain
