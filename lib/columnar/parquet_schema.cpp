// Parquet schema tree and the types read (see parquet_schema.h).
#include "columnar/parquet_schema.h"

#include "util/error.h"

namespace hftrain {
namespace {

const char* logical_name(int id) {
  static const char* names[] = {"", "STRING", "MAP", "LIST", "ENUM", "DECIMAL", "DATE", "TIME", "TIMESTAMP", "INTERVAL",
                                "INTEGER", "NULL", "JSON", "BSON", "UUID", "FLOAT16", "VARIANT", "GEOMETRY", "GEOGRAPHY"};
  return id > 0 && id <= 18 ? names[id] : "an unknown logical type";
}

const char* converted_name(int id) {
  static const char* names[] = {"UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE", "TIME_MILLIS",
                                "TIME_MICROS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8", "UINT_16", "UINT_32",
                                "UINT_64", "INT_8", "INT_16", "INT_32", "INT_64", "JSON", "BSON", "INTERVAL"};
  return id >= 0 && id <= 21 ? names[id] : "an unknown converted type";
}

[[noreturn]] void refuse(const SchemaNode& n, const std::string& what) {
  throw ConfigError("column '" + n.path + "': " + what + " is not read (strings, integers, floats, booleans, lists "
                    "and structs of them are)");
}

ValueKind leaf_kind(const SchemaElement& e, const SchemaNode& n) {
  const PhysicalType t = *e.type;
  const int lt = e.logical_type, ct = e.converted_type;
  const bool is_int = t == PhysicalType::kInt32 || t == PhysicalType::kInt64;
  if (lt == 11) return ValueKind::kNull;
  if (lt == 1 || lt == 4 || (lt == 0 && (ct == 0 || ct == 4))) {
    if (t != PhysicalType::kByteArray) refuse(n, std::string(lt ? logical_name(lt) : converted_name(ct)) + " on a non-BYTE_ARRAY column");
    return ValueKind::kString;
  }
  if (is_int && (lt == 10 || (lt == 0 && ct >= 11 && ct <= 18))) {
    const bool is_unsigned = lt == 10 ? !e.int_signed : ct <= 14;
    if (!is_unsigned) return ValueKind::kInt;
    return t == PhysicalType::kInt32 ? ValueKind::kUInt32 : ValueKind::kUInt64;
  }
  if (lt != 0) refuse(n, std::string("logical type ") + logical_name(lt));
  if (ct >= 0) refuse(n, std::string("converted type ") + converted_name(ct));
  switch (t) {
    case PhysicalType::kBoolean: return ValueKind::kBool;
    case PhysicalType::kInt32:
    case PhysicalType::kInt64: return ValueKind::kInt;
    case PhysicalType::kFloat:
    case PhysicalType::kDouble: return ValueKind::kFloat;
    case PhysicalType::kByteArray: refuse(n, "binary data (BYTE_ARRAY without a STRING annotation)");
    case PhysicalType::kFixed: refuse(n, "FIXED_LEN_BYTE_ARRAY data without a STRING annotation");
    case PhysicalType::kInt96: refuse(n, "INT96 (a legacy timestamp)");
  }
  refuse(n, "an unknown physical type");
}

struct Builder {
  const std::vector<SchemaElement>& el;
  ParquetSchema out;
  std::size_t next = 0;

  int add(int parent, int depth) {
    if (next >= el.size()) throw ConfigError("the schema ends inside a group (num_children says more)");
    if (depth > 64) throw ConfigError("the schema nests more than 64 levels");
    const SchemaElement& e = el[next++];
    const int index = static_cast<int>(out.nodes.size());
    out.nodes.emplace_back();
    {
      SchemaNode& n = out.nodes.back();
      n.name = e.name;
      n.repetition = parent < 0 ? Repetition::kRequired : e.repetition;
      if (parent >= 0) {
        const SchemaNode& p = out.nodes[static_cast<std::size_t>(parent)];
        n.path = p.path.empty() ? e.name : p.path + "." + e.name;
        n.def_level = p.def_level + (n.repetition != Repetition::kRequired ? 1 : 0);
        n.rep_level = p.rep_level + (n.repetition == Repetition::kRepeated ? 1 : 0);
      }
      n.leaf = e.num_children == 0 && e.type.has_value() && parent >= 0;
    }
    if (out.nodes[static_cast<std::size_t>(index)].leaf) {
      SchemaNode& n = out.nodes[static_cast<std::size_t>(index)];
      n.leaf_type = LeafType{*e.type, e.type_length, leaf_kind(e, n)};
      n.first_leaf = static_cast<int>(out.leaves.size());
      n.leaf_count = 1;
      out.leaves.push_back(index);
      return index;
    }
    if (e.num_children <= 0) throw ConfigError("schema group '" + e.name + "' has no columns");
    const bool is_list = e.logical_type == 3 || (e.logical_type == 0 && e.converted_type == 3);
    if (e.logical_type == 2 || e.converted_type == 1 || e.converted_type == 2) refuse(out.nodes[static_cast<std::size_t>(index)], "a map");
    if (e.logical_type != 0 && !is_list) refuse(out.nodes[static_cast<std::size_t>(index)], std::string("a group of logical type ") + logical_name(e.logical_type));
    for (int c = 0; c < e.num_children; ++c) {
      const int child = add(index, depth + 1);
      SchemaNode& n = out.nodes[static_cast<std::size_t>(index)];
      n.children.push_back(child);
      if (n.first_leaf < 0) n.first_leaf = out.nodes[static_cast<std::size_t>(child)].first_leaf;
      n.leaf_count += out.nodes[static_cast<std::size_t>(child)].leaf_count;
    }
    if (is_list) mark_list(index);
    return index;
  }

  void mark_list(int index) {
    SchemaNode& g = out.nodes[static_cast<std::size_t>(index)];
    const int r = g.children.size() == 1 ? g.children[0] : -1;
    if (r < 0 || out.nodes[static_cast<std::size_t>(r)].repetition != Repetition::kRepeated)
      refuse(g, "a LIST group without a single repeated child");
    g.list_repeated = r;
    SchemaNode& rep = out.nodes[static_cast<std::size_t>(r)];
    // LogicalTypes.md: a repeated group of one field, not named "array" or "<list>_tuple", wraps the element.
    if (!rep.leaf && rep.children.size() == 1 && rep.name != "array" && rep.name != g.name + "_tuple")
      rep.list_element = rep.children[0];
  }
};

}  // namespace

ParquetSchema build_parquet_schema(const std::vector<SchemaElement>& elements) {
  Builder b{elements, {}, 0};
  b.add(-1, 0);
  if (b.next != elements.size()) throw ConfigError("the schema lists elements after its root's columns");
  if (b.out.nodes[0].leaf || b.out.leaves.empty()) throw ConfigError("the schema has no columns");
  return std::move(b.out);
}

}  // namespace hftrain
