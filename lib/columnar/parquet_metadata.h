// Parquet's footer (FileMetaData) and page headers, decoded from Thrift compact bytes into the few fields
// hftrain reads: the flattened schema, the row groups and their column chunks, and each page's kind, sizes
// and encodings (apache/parquet-format, parquet.thrift).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "columnar/byte_cursor.h"

namespace hftrain {

// parquet.thrift enums, by value.
enum class PhysicalType { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6, kFixed = 7 };
enum class Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum class PageType { kData = 0, kIndex = 1, kDictionary = 2, kDataV2 = 3 };
// Encoding values: PLAIN 0, PLAIN_DICTIONARY 2, RLE 3, BIT_PACKED 4, DELTA_BINARY_PACKED 5,
// DELTA_LENGTH_BYTE_ARRAY 6, DELTA_BYTE_ARRAY 7, RLE_DICTIONARY 8, BYTE_STREAM_SPLIT 9.
std::string encoding_name(int32_t encoding);

struct SchemaElement {
  std::string name;
  std::optional<PhysicalType> type;  // absent for groups
  int32_t type_length = 0;
  Repetition repetition = Repetition::kRequired;
  int32_t num_children = 0;
  int32_t converted_type = -1;  // ConvertedType, -1 = none
  int32_t logical_type = 0;     // the LogicalType union's field id, 0 = none
  int32_t int_bit_width = 0;    // LogicalType INTEGER
  bool int_signed = true;
};

struct ColumnChunkMeta {
  PhysicalType type = PhysicalType::kInt32;
  std::vector<std::string> path;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
  bool external = false;  // ColumnChunk.file_path set: the data is in another file
  bool encrypted = false;
};

struct RowGroupMeta {
  std::vector<ColumnChunkMeta> columns;
  int64_t num_rows = 0;
};

struct FileMeta {
  std::vector<SchemaElement> schema;  // depth-first, the root first
  int64_t num_rows = 0;
  std::vector<RowGroupMeta> row_groups;
  bool encrypted = false;
};

struct PageHeader {
  PageType type = PageType::kData;
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  int32_t num_values = 0;  // data pages: level entries (nulls included); dictionary pages: entries
  int32_t encoding = 0;
  int32_t def_encoding = 3, rep_encoding = 3;  // data page v1
  int32_t num_nulls = 0, num_rows = 0;         // data page v2
  int32_t def_bytes = 0, rep_bytes = 0;        // data page v2
  bool is_compressed = true;                   // data page v2
};

FileMeta parse_file_meta(Bytes footer);
PageHeader parse_page_header(ByteCursor& in);

}  // namespace hftrain
