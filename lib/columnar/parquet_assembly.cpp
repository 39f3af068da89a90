// Record assembly from repetition / definition levels (see parquet_assembly.h). Every leaf under a node
// holds one entry for each occurrence of the node (or for its absence), so a node's shape is read off its
// first leaf and the entries of all its leaves are consumed together.
#include "columnar/parquet_assembly.h"

#include <string>

#include "util/error.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;

class Assembler {
 public:
  Assembler(const ParquetSchema& s, const std::vector<LeafColumn>& cols)
      : s_(s), cols_(cols), entry_(cols.size(), 0), value_(cols.size(), 0) {}

  Json row() {
    const SchemaNode& root = s_.nodes[0];
    const int l = root.first_leaf;
    if (!has_entry(l) || rep(l) != 0) fail(root.first_leaf, "the levels do not start a new row where one is due");
    Json obj = Json::object();
    for (int c : root.children) obj[node(c).name] = read_field(c);
    return obj;
  }

  void check_consumed() const {
    for (std::size_t l = 0; l < cols_.size(); ++l)
      if (entry_[l] != cols_[l].entries || value_[l] != cols_[l].values.size())
        fail(static_cast<int>(l), "the column holds more values than the row group's rows");
  }

 private:
  const SchemaNode& node(int i) const { return s_.nodes[static_cast<std::size_t>(i)]; }
  bool has_entry(int l) const { return entry_[static_cast<std::size_t>(l)] < cols_[static_cast<std::size_t>(l)].entries; }
  int rep(int l) const {
    const LeafColumn& c = cols_[static_cast<std::size_t>(l)];
    return c.rep.empty() ? 0 : c.rep[entry_[static_cast<std::size_t>(l)]];
  }
  int def(int l) const {
    const LeafColumn& c = cols_[static_cast<std::size_t>(l)];
    return c.def.empty() ? node(s_.leaves[static_cast<std::size_t>(l)]).def_level : c.def[entry_[static_cast<std::size_t>(l)]];
  }
  [[noreturn]] void fail(int leaf, const std::string& reason) const {
    throw ConfigError("column '" + node(s_.leaves[static_cast<std::size_t>(leaf)]).path + "': " + reason);
  }

  // The node is absent (null or an empty list) here: one entry of each of its leaves says so.
  void skip_absent(const SchemaNode& n) {
    for (int l = n.first_leaf; l < n.first_leaf + n.leaf_count; ++l) {
      if (!has_entry(l)) fail(l, "the levels end before the row group's last row");
      ++entry_[static_cast<std::size_t>(l)];
    }
  }

  Json read_field(int i) {
    const SchemaNode& n = node(i);
    const int l = n.first_leaf;
    if (!has_entry(l)) fail(l, "the levels end before the row group's last row");
    if (n.repetition == Repetition::kRepeated) {
      Json arr = Json::array();
      if (def(l) < n.def_level) {
        skip_absent(n);
        return arr;
      }
      do arr.push_back(n.list_element >= 0 ? read_field(n.list_element) : read_instance(i));
      while (has_entry(l) && rep(l) == n.rep_level);
      return arr;
    }
    if (n.repetition == Repetition::kOptional && def(l) < n.def_level) {
      skip_absent(n);
      return Json(nullptr);
    }
    return read_instance(i);
  }

  Json read_instance(int i) {
    const SchemaNode& n = node(i);
    if (n.leaf) {
      const auto l = static_cast<std::size_t>(n.first_leaf);
      if (def(n.first_leaf) != n.def_level) fail(n.first_leaf, "a definition level that matches no value");
      if (value_[l] >= cols_[l].values.size()) fail(n.first_leaf, "the levels need more values than the pages hold");
      ++entry_[l];
      return cols_[l].values[value_[l]++];
    }
    if (n.list_repeated >= 0) return read_field(n.list_repeated);
    Json obj = Json::object();
    for (int c : n.children) obj[node(c).name] = read_field(c);
    return obj;
  }

  const ParquetSchema& s_;
  const std::vector<LeafColumn>& cols_;
  std::vector<std::size_t> entry_, value_;
};

}  // namespace

void assemble_rows(const ParquetSchema& schema, const std::vector<LeafColumn>& leaves, int64_t num_rows,
                   std::vector<nlohmann::ordered_json>& out) {
  Assembler a(schema, leaves);
  for (int64_t r = 0; r < num_rows; ++r) out.push_back(a.row());
  a.check_consumed();
}

}  // namespace hftrain
