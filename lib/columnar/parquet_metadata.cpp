// Parquet FileMetaData and PageHeader from Thrift compact bytes (see parquet_metadata.h); field ids are
// parquet.thrift's.
#include "columnar/parquet_metadata.h"

#include "columnar/thrift_compact.h"

namespace hftrain {
namespace {

using T = ThriftType;

void need_type(ThriftReader& r, T got, T want, const char* field) {
  if (got != want) r.cursor().fail(std::string("parquet metadata field ") + field + " has the wrong thrift type");
}

int32_t i32_field(ThriftReader& r, T t, const char* field) {
  need_type(r, t, T::kI32, field);
  return r.read_i32();
}

int64_t i64_field(ThriftReader& r, T t, const char* field) {
  need_type(r, t, T::kI64, field);
  return r.read_i64();
}

// LogicalType union: which member is set, and IntType's width and sign.
void read_logical_type(ThriftReader& r, SchemaElement& e) {
  r.read_struct([&](int16_t id, T t) {
    e.logical_type = id;
    if (id == 10 && t == T::kStruct) {
      r.read_struct([&](int16_t f, T ft) {
        if (f == 1 && ft == T::kByte) e.int_bit_width = static_cast<int8_t>(r.cursor().u8());
        else if (f == 2) e.int_signed = ThriftReader::field_bool(ft);
        else r.skip(ft);
      });
    } else {
      r.skip(t);
    }
  });
}

SchemaElement read_schema_element(ThriftReader& r) {
  SchemaElement e;
  r.read_struct([&](int16_t id, T t) {
    switch (id) {
      case 1: e.type = static_cast<PhysicalType>(i32_field(r, t, "SchemaElement.type")); break;
      case 2: e.type_length = i32_field(r, t, "SchemaElement.type_length"); break;
      case 3: e.repetition = static_cast<Repetition>(i32_field(r, t, "SchemaElement.repetition_type")); break;
      case 4: need_type(r, t, T::kBinary, "SchemaElement.name"); e.name = r.read_string(); break;
      case 5: e.num_children = i32_field(r, t, "SchemaElement.num_children"); break;
      case 6: e.converted_type = i32_field(r, t, "SchemaElement.converted_type"); break;
      case 10: need_type(r, t, T::kStruct, "SchemaElement.logicalType"); read_logical_type(r, e); break;
      default: r.skip(t);
    }
  });
  if (e.type && (static_cast<int>(*e.type) < 0 || static_cast<int>(*e.type) > 7))
    r.cursor().fail("schema element '" + e.name + "' has an unknown physical type");
  if (static_cast<int>(e.repetition) < 0 || static_cast<int>(e.repetition) > 2)
    r.cursor().fail("schema element '" + e.name + "' has an unknown repetition type");
  return e;
}

void read_column_meta(ThriftReader& r, ColumnChunkMeta& c) {
  r.read_struct([&](int16_t id, T t) {
    switch (id) {
      case 1: c.type = static_cast<PhysicalType>(i32_field(r, t, "ColumnMetaData.type")); break;
      case 3:
        need_type(r, t, T::kList, "ColumnMetaData.path_in_schema");
        r.read_list([&](T et) {
          need_type(r, et, T::kBinary, "ColumnMetaData.path_in_schema");
          c.path.push_back(r.read_string());
        });
        break;
      case 4: c.codec = i32_field(r, t, "ColumnMetaData.codec"); break;
      case 5: c.num_values = i64_field(r, t, "ColumnMetaData.num_values"); break;
      case 7: c.total_compressed_size = i64_field(r, t, "ColumnMetaData.total_compressed_size"); break;
      case 9: c.data_page_offset = i64_field(r, t, "ColumnMetaData.data_page_offset"); break;
      case 11: c.dictionary_page_offset = i64_field(r, t, "ColumnMetaData.dictionary_page_offset"); break;
      default: r.skip(t);
    }
  });
}

ColumnChunkMeta read_column_chunk(ThriftReader& r) {
  ColumnChunkMeta c;
  bool has_meta = false;
  r.read_struct([&](int16_t id, T t) {
    if (id == 1) c.external = true, r.skip(t);
    else if (id == 3 && t == T::kStruct) has_meta = true, read_column_meta(r, c);
    else if (id == 8 || id == 9) c.encrypted = true, r.skip(t);
    else r.skip(t);
  });
  if (!has_meta && !c.encrypted) r.cursor().fail("a column chunk without its ColumnMetaData");
  return c;
}

RowGroupMeta read_row_group(ThriftReader& r) {
  RowGroupMeta g;
  r.read_struct([&](int16_t id, T t) {
    if (id == 1) {
      need_type(r, t, T::kList, "RowGroup.columns");
      r.read_list([&](T et) {
        need_type(r, et, T::kStruct, "RowGroup.columns");
        g.columns.push_back(read_column_chunk(r));
      });
    } else if (id == 3) {
      g.num_rows = i64_field(r, t, "RowGroup.num_rows");
    } else {
      r.skip(t);
    }
  });
  return g;
}

}  // namespace

std::string encoding_name(int32_t encoding) {
  static const char* names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
                                "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT", "ALP"};
  if (encoding >= 0 && encoding <= 10) return names[encoding];
  return "encoding " + std::to_string(encoding);
}

FileMeta parse_file_meta(Bytes footer) {
  ByteCursor in(footer, "parquet footer (FileMetaData)");
  ThriftReader r(in);
  FileMeta m;
  r.read_struct([&](int16_t id, T t) {
    switch (id) {
      case 2:
        need_type(r, t, T::kList, "FileMetaData.schema");
        r.read_list([&](T et) {
          need_type(r, et, T::kStruct, "FileMetaData.schema");
          m.schema.push_back(read_schema_element(r));
        });
        break;
      case 3: m.num_rows = i64_field(r, t, "FileMetaData.num_rows"); break;
      case 4:
        need_type(r, t, T::kList, "FileMetaData.row_groups");
        r.read_list([&](T et) {
          need_type(r, et, T::kStruct, "FileMetaData.row_groups");
          m.row_groups.push_back(read_row_group(r));
        });
        break;
      case 8: m.encrypted = true, r.skip(t); break;
      default: r.skip(t);
    }
  });
  if (m.schema.empty()) in.fail("the footer has no schema");
  return m;
}

PageHeader parse_page_header(ByteCursor& in) {
  ThriftReader r(in);
  PageHeader h;
  h.type = static_cast<PageType>(-1);
  r.read_struct([&](int16_t id, T t) {
    switch (id) {
      case 1: h.type = static_cast<PageType>(i32_field(r, t, "PageHeader.type")); break;
      case 2: h.uncompressed_size = i32_field(r, t, "PageHeader.uncompressed_page_size"); break;
      case 3: h.compressed_size = i32_field(r, t, "PageHeader.compressed_page_size"); break;
      case 5:  // DataPageHeader
        need_type(r, t, T::kStruct, "PageHeader.data_page_header");
        r.read_struct([&](int16_t f, T ft) {
          if (f == 1) h.num_values = i32_field(r, ft, "DataPageHeader.num_values");
          else if (f == 2) h.encoding = i32_field(r, ft, "DataPageHeader.encoding");
          else if (f == 3) h.def_encoding = i32_field(r, ft, "DataPageHeader.definition_level_encoding");
          else if (f == 4) h.rep_encoding = i32_field(r, ft, "DataPageHeader.repetition_level_encoding");
          else r.skip(ft);
        });
        break;
      case 7:  // DictionaryPageHeader
        need_type(r, t, T::kStruct, "PageHeader.dictionary_page_header");
        r.read_struct([&](int16_t f, T ft) {
          if (f == 1) h.num_values = i32_field(r, ft, "DictionaryPageHeader.num_values");
          else if (f == 2) h.encoding = i32_field(r, ft, "DictionaryPageHeader.encoding");
          else r.skip(ft);
        });
        break;
      case 8:  // DataPageHeaderV2
        need_type(r, t, T::kStruct, "PageHeader.data_page_header_v2");
        r.read_struct([&](int16_t f, T ft) {
          switch (f) {
            case 1: h.num_values = i32_field(r, ft, "DataPageHeaderV2.num_values"); break;
            case 2: h.num_nulls = i32_field(r, ft, "DataPageHeaderV2.num_nulls"); break;
            case 3: h.num_rows = i32_field(r, ft, "DataPageHeaderV2.num_rows"); break;
            case 4: h.encoding = i32_field(r, ft, "DataPageHeaderV2.encoding"); break;
            case 5: h.def_bytes = i32_field(r, ft, "DataPageHeaderV2.definition_levels_byte_length"); break;
            case 6: h.rep_bytes = i32_field(r, ft, "DataPageHeaderV2.repetition_levels_byte_length"); break;
            case 7: h.is_compressed = ThriftReader::field_bool(ft); break;
            default: r.skip(ft);
          }
        });
        break;
      default: r.skip(t);
    }
  });
  if (static_cast<int>(h.type) < 0 || static_cast<int>(h.type) > 3) in.fail("a page header without a known page type");
  if (h.compressed_size < 0 || h.uncompressed_size < 0 || h.num_values < 0 || h.def_bytes < 0 || h.rep_bytes < 0)
    in.fail("a page header with a negative size");
  return h;
}

}  // namespace hftrain
