// Which files a data option names, and reading their rows: a file; a glob (`data/train-*.parquet`, sorted);
// a folder written by datasets' save_to_disk (state.json's "_data_files" in order); a DatasetDict folder
// (dataset_dict.json's "splits", one save_to_disk folder each); or a folder of shards named by split as on
// the Hub (`[data/]train-00000-of-00002.parquet`, `validation-*`, `test-*`). Parquet and Arrow files are
// read through lib/columnar into the same rows as JSON Lines.
#pragma once

#include <string>
#include <vector>

#include "data/text_rows.h"

namespace hftrain {

// True when `spec` names an existing file or folder, or a glob that matches a file.
bool data_files_exist(const std::string& spec);

// The files of `spec` for the split `split` ("train", "validation" or "test"; a folder's split may also be
// named as HF names them, e.g. "valid" / "dev" for validation), in reading order. Throws ConfigError naming
// `key` when nothing matches or a folder holds no such split.
std::vector<std::string> resolve_data_files(const std::string& spec, const std::string& split, const std::string& key);

// The rows of `files`, in order; rows of a split with several files know their file (Row::file).
std::vector<Row> read_split_rows(const std::vector<std::string>& files, RowFormat format);

// A parquet or Arrow IPC file's rows (`arrow`: the Arrow reader) as Rows: row i is element i; strings stay
// strings, null is nullopt, any other value (numbers, lists, structs) its JSON text.
std::vector<Row> read_columnar_rows(const std::string& path, bool arrow);

// The cache key's part for the contents of `files`: one file's xxh64 as before, or the count and each hash.
std::string files_identity(const std::vector<std::string>& files);

}  // namespace hftrain
