// Record assembly (Dremel): the rows of one row group from its leaf columns' repetition and definition
// levels and values, as JSON objects shaped by the schema tree.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "columnar/parquet_pages.h"
#include "columnar/parquet_schema.h"

namespace hftrain {

// Appends `num_rows` rows to `out`. Throws ConfigError (naming the column) when the levels do not describe
// `num_rows` rows of the schema.
void assemble_rows(const ParquetSchema& schema, const std::vector<LeafColumn>& leaves, int64_t num_rows,
                   std::vector<nlohmann::ordered_json>& out);

}  // namespace hftrain
