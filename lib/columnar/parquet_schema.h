// A parquet file's schema as a tree (from the footer's depth-first SchemaElement list): each node's
// definition and repetition level, LIST-annotated groups (the 3-level, 2-level and legacy layouts of
// LogicalTypes.md) and each leaf's JSON kind. Types hftrain does not read (binary without STRING, DECIMAL,
// DATE / TIME / TIMESTAMP, INT96, maps, ...) are refused naming the column.
#pragma once

#include <string>
#include <vector>

#include "columnar/parquet_metadata.h"
#include "columnar/parquet_values.h"

namespace hftrain {

struct SchemaNode {
  std::string name;
  std::string path;  // dotted, from the first level below the root
  Repetition repetition = Repetition::kRequired;
  bool leaf = false;
  std::vector<int> children;
  int def_level = 0;  // definition level when this node is present
  int rep_level = 0;  // repeated nodes from the root to this one, itself included
  int list_repeated = -1;  // LIST group: its repeated child
  int list_element = -1;   // repeated child of a 3-level LIST: the child whose values are the elements
  int first_leaf = -1;     // leaf index of the first leaf under this node
  int leaf_count = 0;
  LeafType leaf_type;      // leaves only
};

struct ParquetSchema {
  std::vector<SchemaNode> nodes;  // [0] = root
  std::vector<int> leaves;        // node index of each leaf, in column-chunk order
};

// Throws ConfigError naming the column on a malformed schema or a type that is not read.
ParquetSchema build_parquet_schema(const std::vector<SchemaElement>& elements);

}  // namespace hftrain
