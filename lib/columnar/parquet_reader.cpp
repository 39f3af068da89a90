// Parquet file reading: magic bytes, footer, schema, then each row group's column chunks and their rows
// (see parquet_reader.h).
#include "columnar/parquet_reader.h"

#include <cstring>

#include "columnar/parquet_assembly.h"
#include "columnar/parquet_pages.h"
#include "columnar/parquet_schema.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

std::string dotted(const std::vector<std::string>& path) {
  std::string s;
  for (const auto& p : path) s += (s.empty() ? "" : ".") + p;
  return s;
}

void read_row_group(Bytes file, std::size_t data_end, const ParquetSchema& schema, const RowGroupMeta& group, int index,
                    std::vector<nlohmann::ordered_json>& rows) {
  const std::string where = "row group " + std::to_string(index);
  if (group.columns.size() != schema.leaves.size())
    throw ConfigError(where + ": " + std::to_string(group.columns.size()) + " column chunks for the schema's " +
                      std::to_string(schema.leaves.size()) + " columns");
  if (group.num_rows < 0) throw ConfigError(where + ": a negative row count");
  std::vector<LeafColumn> leaves;
  for (std::size_t k = 0; k < schema.leaves.size(); ++k) {
    const SchemaNode& leaf = schema.nodes[static_cast<std::size_t>(schema.leaves[k])];
    const ColumnChunkMeta& chunk = group.columns[k];
    const std::string column = where + ", column '" + leaf.path + "': ";
    if (dotted(chunk.path) != leaf.path)
      throw ConfigError(column + "the column chunk is for '" + dotted(chunk.path) + "'");
    if (chunk.type != leaf.leaf_type.physical) throw ConfigError(column + "the column chunk's type differs from the schema's");
    try {
      leaves.push_back(read_column_chunk(file, data_end, chunk, leaf.leaf_type, LeafLevels{leaf.def_level, leaf.rep_level}));
    } catch (const ConfigError& e) {
      throw ConfigError(column + e.what());
    }
  }
  try {
    assemble_rows(schema, leaves, group.num_rows, rows);
  } catch (const ConfigError& e) {
    throw ConfigError(where + ", " + e.what());
  }
}

std::vector<nlohmann::ordered_json> read_rows_of(const std::vector<char>& raw) {
  const Bytes file(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  if (file.size < 12 || std::memcmp(file.data, "PAR1", 4) != 0) {
    if (file.size >= 4 && std::memcmp(file.data, "PARE", 4) == 0) throw ConfigError("an encrypted parquet file, which is not read");
    throw ConfigError("not a parquet file (no PAR1 magic at its start)");
  }
  const uint8_t* tail = file.data + file.size - 4;
  if (std::memcmp(tail, "PARE", 4) == 0) throw ConfigError("an encrypted parquet footer, which is not read");
  if (std::memcmp(tail, "PAR1", 4) != 0) throw ConfigError("no PAR1 magic at the end: the file is truncated (its footer is missing)");
  const uint64_t footer_len = load_le32(tail - 4);
  if (footer_len > file.size - 12)
    throw ConfigError("the footer length " + std::to_string(footer_len) + " runs past the start of the file (truncated or corrupt)");
  const std::size_t footer_start = file.size - 8 - static_cast<std::size_t>(footer_len);
  const FileMeta meta = parse_file_meta(file.slice(footer_start, footer_len, "the footer"));
  if (meta.encrypted) throw ConfigError("an encrypted parquet file, which is not read");
  const ParquetSchema schema = build_parquet_schema(meta.schema);
  std::vector<nlohmann::ordered_json> rows;
  int64_t total = 0;
  for (std::size_t g = 0; g < meta.row_groups.size(); ++g) {
    read_row_group(file, footer_start, schema, meta.row_groups[g], static_cast<int>(g), rows);
    total += meta.row_groups[g].num_rows;
  }
  if (total != meta.num_rows)
    throw ConfigError("the row groups hold " + std::to_string(total) + " rows, the footer says " + std::to_string(meta.num_rows));
  return rows;
}

}  // namespace

std::vector<nlohmann::ordered_json> read_parquet_rows(const std::string& path) {
  std::vector<char> raw;
  try {
    raw = read_binary_file(path);
  } catch (const Error& e) {
    throw ConfigError(path + ": cannot read the parquet file");
  }
  try {
    return read_rows_of(raw);
  } catch (const ConfigError& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

}  // namespace hftrain
