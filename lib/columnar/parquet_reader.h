// Rows of a parquet file as JSON objects (column order kept, nested lists and structs as JSON arrays and
// objects, nulls as null), over all its row groups. Every error is a ConfigError naming the file and,
// where it arose in one, the row group and column.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hftrain {

std::vector<nlohmann::ordered_json> read_parquet_rows(const std::string& path);

}  // namespace hftrain
