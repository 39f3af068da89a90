// Arrow Schema / Field tables into ArrowField trees (see arrow_schema.h). Field slots: name 0, nullable 1,
// type_type 2, type 3, dictionary 4, children 5; Schema: endianness 0, fields 1.
#include "columnar/arrow_schema.h"

#include "util/error.h"

namespace hftrain {
namespace {

const char* type_name(int t) {
  static const char* names[] = {"NONE", "Null", "Int", "FloatingPoint", "Binary", "Utf8", "Bool", "Decimal", "Date",
                                "Time", "Timestamp", "Interval", "List", "Struct", "Union", "FixedSizeBinary",
                                "FixedSizeList", "Map", "Duration", "LargeBinary", "LargeUtf8", "LargeList",
                                "RunEndEncoded", "BinaryView", "Utf8View", "ListView", "LargeListView"};
  return t >= 0 && t <= 26 ? names[t] : "an unknown type";
}

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw ConfigError("column '" + path + "': " + what + " is not read (strings, integers, floats, booleans, lists "
                    "and structs of them are)");
}

ArrowField parse_field(const FbTable& f, const std::string& parent, int depth) {
  if (depth > 64) throw ConfigError("the schema nests more than 64 levels");
  ArrowField out;
  out.name = f.string(0);
  out.path = parent.empty() ? out.name : parent + "." + out.name;
  const int type = f.u8(2);
  switch (type) {
    case 1: case 5: case 6: case 12: case 13: case 20: case 21: break;
    case 2: {
      const FbTable t = f.table(3);
      out.bit_width = t.i32(0);
      out.is_signed = t.boolean(1);
      if (out.bit_width != 8 && out.bit_width != 16 && out.bit_width != 32 && out.bit_width != 64)
        refuse(out.path, "an integer of " + std::to_string(out.bit_width) + " bits");
      break;
    }
    case 3: {
      const int precision = f.table(3).i16(0);
      if (precision == 0) refuse(out.path, "half-precision floating point");
      out.bit_width = precision == 1 ? 32 : 64;
      break;
    }
    case 16: out.list_size = f.table(3).i32(0); if (out.list_size < 0) refuse(out.path, "a negative list size"); break;
    case 4: case 19: refuse(out.path, std::string("binary data (") + type_name(type) + ")");
    default: refuse(out.path, std::string("Arrow type ") + type_name(type));
  }
  out.type = static_cast<ArrowType>(type);
  if (f.has(4)) {  // DictionaryEncoding: id 0, indexType 1 (Int), isOrdered 2
    const FbTable d = f.table(4);
    out.dictionary_id = d.i64(0);
    if (d.has(1)) {
      const FbTable idx = d.table(1);
      out.index_bit_width = idx.i32(0);
      out.index_signed = idx.boolean(1);
    }
    if (out.index_bit_width != 8 && out.index_bit_width != 16 && out.index_bit_width != 32 && out.index_bit_width != 64)
      refuse(out.path, "dictionary indices of " + std::to_string(out.index_bit_width) + " bits");
  }
  for (uint32_t i = 0; i < f.vector_size(5); ++i) out.children.push_back(parse_field(f.table_at(5, i), out.path, depth + 1));
  const bool nested = out.type == ArrowType::kList || out.type == ArrowType::kLargeList || out.type == ArrowType::kFixedSizeList;
  if (nested && out.children.size() != 1) throw ConfigError("column '" + out.path + "': a list type without one child field");
  return out;
}

}  // namespace

std::vector<ArrowField> parse_arrow_schema(const FbTable& schema) {
  if (schema.i16(0) != 0) throw ConfigError("a big-endian Arrow stream, which is not read");
  std::vector<ArrowField> fields;
  for (uint32_t i = 0; i < schema.vector_size(1); ++i) fields.push_back(parse_field(schema.table_at(1, i), "", 0));
  if (fields.empty()) throw ConfigError("the Arrow schema has no columns");
  return fields;
}

}  // namespace hftrain
