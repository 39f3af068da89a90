// Parquet column chunk pages: dictionary page, data page v1 and v2 (see parquet_pages.h).
#include "columnar/parquet_pages.h"

#include <string>

#include "columnar/codecs.h"
#include "columnar/rle_hybrid.h"
#include "util/error.h"

namespace hftrain {
namespace {

// Each entry becomes a JSON value in memory: a chunk claiming more is corrupt or too large to hold.
constexpr int64_t kMaxChunkValues = int64_t{1} << 27;

// Levels of a v1 page: RLE with a 4-byte length prefix (BIT_PACKED, deprecated, is refused by name).
void read_v1_levels(ByteCursor& page, int32_t encoding, int max_level, std::size_t n, std::vector<uint16_t>& out,
                    const char* which) {
  if (max_level == 0) return;
  if (encoding != 3)
    throw ConfigError(std::string(which) + " levels encoded as " + encoding_name(encoding) + " are not read (RLE is)");
  ByteCursor runs(page.take(page.le32()), std::string(which) + " levels");
  std::vector<uint32_t> v;
  decode_rle_hybrid(runs, bit_width_for(static_cast<uint32_t>(max_level)), n, v);
  for (uint32_t x : v) {
    if (x > static_cast<uint32_t>(max_level))
      throw ConfigError(std::string(which) + " level " + std::to_string(x) + " above the column's maximum " + std::to_string(max_level));
    out.push_back(static_cast<uint16_t>(x));
  }
}

void read_v2_levels(Bytes bytes, int max_level, std::size_t n, std::vector<uint16_t>& out, const char* which) {
  if (max_level == 0) return;
  ByteCursor runs(bytes, std::string(which) + " levels");
  std::vector<uint32_t> v;
  decode_rle_hybrid(runs, bit_width_for(static_cast<uint32_t>(max_level)), n, v);
  for (uint32_t x : v) {
    if (x > static_cast<uint32_t>(max_level))
      throw ConfigError(std::string(which) + " level " + std::to_string(x) + " above the column's maximum " + std::to_string(max_level));
    out.push_back(static_cast<uint16_t>(x));
  }
}

// Values present in the page: entries whose definition level is the maximum.
std::size_t defined_count(const LeafColumn& col, std::size_t first, std::size_t n, int max_def) {
  if (max_def == 0) return n;
  std::size_t k = 0;
  for (std::size_t i = first; i < first + n; ++i) k += col.def[i] == max_def ? 1 : 0;
  return k;
}

struct ChunkState {
  Codec codec;
  const LeafType& type;
  LeafLevels levels;
  bool has_dictionary = false;
  JsonValues dictionary;
  LeafColumn col;
};

void read_dictionary_page(ChunkState& s, const PageHeader& h, Bytes body) {
  if (s.has_dictionary) throw ConfigError("a second dictionary page in one column chunk");
  if (h.encoding != 0 && h.encoding != 2)
    throw ConfigError("a dictionary page encoded as " + encoding_name(h.encoding) + " (PLAIN is read)");
  const std::vector<uint8_t> data = decompress(s.codec, body, static_cast<std::size_t>(h.uncompressed_size));
  ByteCursor in(Bytes(data), "dictionary page");
  decode_values(0, in, s.type, static_cast<std::size_t>(h.num_values), nullptr, s.dictionary);
  s.has_dictionary = true;
}

void read_data_page(ChunkState& s, const PageHeader& h, Bytes body) {
  const std::size_t n = static_cast<std::size_t>(h.num_values);
  const std::size_t first = s.col.entries;
  std::vector<uint8_t> data;
  ByteCursor values(Bytes(), "");
  if (h.type == PageType::kData) {
    data = decompress(s.codec, body, static_cast<std::size_t>(h.uncompressed_size));
    values = ByteCursor(Bytes(data), "data page");
    read_v1_levels(values, h.rep_encoding, s.levels.max_rep, n, s.col.rep, "repetition");
    read_v1_levels(values, h.def_encoding, s.levels.max_def, n, s.col.def, "definition");
  } else {  // v2: levels first, never compressed; then the values, compressed when is_compressed
    const auto level_bytes = static_cast<uint64_t>(h.rep_bytes) + static_cast<uint64_t>(h.def_bytes);
    Bytes rep = body.slice(0, static_cast<uint64_t>(h.rep_bytes), "the repetition levels of a v2 data page");
    Bytes def = body.slice(static_cast<uint64_t>(h.rep_bytes), static_cast<uint64_t>(h.def_bytes), "the definition levels of a v2 data page");
    read_v2_levels(rep, s.levels.max_rep, n, s.col.rep, "repetition");
    read_v2_levels(def, s.levels.max_def, n, s.col.def, "definition");
    Bytes rest = body.slice(level_bytes, body.size - level_bytes, "the values of a v2 data page");
    if (static_cast<uint64_t>(h.uncompressed_size) < level_bytes) throw ConfigError("a v2 data page smaller than its levels");
    const std::size_t expected = static_cast<std::size_t>(static_cast<uint64_t>(h.uncompressed_size) - level_bytes);
    data = decompress(h.is_compressed ? s.codec : Codec::kUncompressed, rest, expected);
    values = ByteCursor(Bytes(data), "data page v2");
  }
  s.col.entries += n;
  decode_values(h.encoding, values, s.type, defined_count(s.col, first, n, s.levels.max_def),
                s.has_dictionary ? &s.dictionary : nullptr, s.col.values);
}

}  // namespace

LeafColumn read_column_chunk(Bytes file, std::size_t data_end, const ColumnChunkMeta& meta, const LeafType& type,
                             LeafLevels levels) {
  if (meta.external) throw ConfigError("the column chunk's data is in another file (ColumnChunk.file_path), which is not read");
  if (meta.encrypted) throw ConfigError("the column chunk is encrypted, which is not read");
  if (meta.num_values < 0 || meta.num_values > kMaxChunkValues)
    throw ConfigError("a column chunk of " + std::to_string(meta.num_values) + " values (at most " +
                      std::to_string(kMaxChunkValues) + " are read)");
  ChunkState s{parquet_codec(meta.codec), type, levels, false, {}, {}};
  int64_t start = meta.data_page_offset;
  if (meta.dictionary_page_offset && *meta.dictionary_page_offset > 0 && *meta.dictionary_page_offset < start)
    start = *meta.dictionary_page_offset;
  if (start < 4 || meta.total_compressed_size < 0)
    throw ConfigError("the column chunk's offset " + std::to_string(start) + " lies outside the data");
  Bytes chunk = Bytes(file.data, data_end).slice(static_cast<uint64_t>(start), static_cast<uint64_t>(meta.total_compressed_size),
                                                 "the column chunk");
  ByteCursor in(chunk, "column chunk");
  while (s.col.entries < static_cast<uint64_t>(meta.num_values)) {
    if (in.at_end())
      throw ConfigError("the column chunk ends after " + std::to_string(s.col.entries) + " of its " +
                        std::to_string(meta.num_values) + " values");
    const PageHeader h = parse_page_header(in);
    if (h.type != PageType::kDictionary && static_cast<uint64_t>(h.num_values) > static_cast<uint64_t>(meta.num_values) - s.col.entries)
      throw ConfigError("a data page of " + std::to_string(h.num_values) + " values runs past the column chunk's " +
                        std::to_string(meta.num_values));
    Bytes body = in.take(static_cast<std::size_t>(h.compressed_size));
    if (h.type == PageType::kDictionary) read_dictionary_page(s, h, body);
    else if (h.type == PageType::kData || h.type == PageType::kDataV2) read_data_page(s, h, body);
    // index pages carry nothing to read
  }
  if (s.col.entries != static_cast<uint64_t>(meta.num_values))
    throw ConfigError("the pages hold " + std::to_string(s.col.entries) + " values, the column chunk says " +
                      std::to_string(meta.num_values));
  return std::move(s.col);
}

}  // namespace hftrain
