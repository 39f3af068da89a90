// Data file resolution (globs, save_to_disk and DatasetDict folders, Hub shard folders) and columnar rows
// (see data_files.h).
#include "data/data_files.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "columnar/arrow_stream.h"
#include "columnar/parquet_reader.h"
#include "data/dataset_cache.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/strings.h"

namespace hftrain {
namespace {

namespace fs = std::filesystem;

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i)
      if (fs::is_regular_file(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;  // glob(3) sorts its matches
}

// HF's names of a split in file and folder names (datasets' data_files patterns).
std::vector<std::string> split_aliases(const std::string& split) {
  if (split == "validation") return {"validation", "valid", "val", "dev"};
  if (split == "test") return {"test", "testing"};
  return {"train", "training"};
}

nlohmann::json read_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const std::exception& e) {
    throw ConfigError(path + ": cannot read it as JSON (" + e.what() + ")");
  }
}

// A save_to_disk folder: state.json's "_data_files" [{"filename": ...}], in that order.
std::vector<std::string> saved_dataset_files(const fs::path& dir) {
  const std::string state_path = (dir / "state.json").string();
  const nlohmann::json state = read_json_file(state_path);
  if (!state.is_object() || !state.contains("_data_files") || !state["_data_files"].is_array() || state["_data_files"].empty())
    throw ConfigError(state_path + ": no \"_data_files\" list (a folder written by datasets' save_to_disk has one)");
  std::vector<std::string> files;
  for (const auto& f : state["_data_files"]) {
    if (!f.is_object() || !f.contains("filename") || !f["filename"].is_string())
      throw ConfigError(state_path + ": an entry of \"_data_files\" without a \"filename\"");
    const fs::path p = dir / f["filename"].get<std::string>();
    if (!fs::is_regular_file(p)) throw ConfigError(state_path + ": its data file '" + p.string() + "' does not exist");
    files.push_back(p.string());
  }
  return files;
}

std::vector<std::string> dataset_dict_files(const fs::path& dir, const std::string& split, const std::string& key) {
  const std::string dict_path = (dir / "dataset_dict.json").string();
  const nlohmann::json dict = read_json_file(dict_path);
  if (!dict.is_object() || !dict.contains("splits") || !dict["splits"].is_array())
    throw ConfigError(dict_path + ": no \"splits\" list (a DatasetDict saved by save_to_disk has one)");
  std::string listed;
  for (const auto& s : dict["splits"]) {
    if (!s.is_string()) throw ConfigError(dict_path + ": a split name that is not a string");
    const std::string name = s.get<std::string>();
    listed += (listed.empty() ? "" : ", ") + name;
    for (const auto& alias : split_aliases(split))
      if (name == alias) return saved_dataset_files(dir / name);
  }
  throw ConfigError(key + ": the DatasetDict '" + dir.string() + "' has no " + split + " split (its splits: " + listed + ")");
}

// A folder of data files: those named for the split (<split>-..., <split>_..., <split>.<ext>) in it or its
// data/ folder; when no file is named for any split, all of them are the train split (as datasets does).
std::vector<std::string> shard_folder_files(const fs::path& dir, const std::string& split, const std::string& key) {
  std::vector<std::string> named, unnamed;
  for (const fs::path& d : {dir, dir / "data"}) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || name[0] == '.' ||
          (ext != ".parquet" && ext != ".arrow" && ext != ".jsonl" && ext != ".json" && ext != ".csv" && ext != ".tsv" && ext != ".txt"))
        continue;
      bool any_split = false, this_split = false;
      for (const char* s : {"train", "validation", "test"})
        for (const auto& alias : split_aliases(s))
          if (starts_with(name, alias) && std::string("-_.").find(name[alias.size()]) != std::string::npos) {
            any_split = true;
            this_split = this_split || s == split;
          }
      if (this_split) named.push_back(e.path().string());
      else if (!any_split) unnamed.push_back(e.path().string());
    }
  }
  if (named.empty() && split == "train") named = unnamed;
  std::sort(named.begin(), named.end());
  if (named.empty())
    throw ConfigError(key + ": the folder '" + dir.string() + "' holds no " + split + " data files (named " + split +
                      "-*.parquet, " + split + "-*.arrow, ... in it or in its data/ folder)");
  return named;
}

}  // namespace

bool data_files_exist(const std::string& spec) {
  std::error_code ec;
  if (fs::exists(spec, ec)) return true;
  return is_glob(spec) && !glob_files(spec).empty();
}

std::vector<std::string> resolve_data_files(const std::string& spec, const std::string& split, const std::string& key) {
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return {spec};
  if (fs::is_directory(spec, ec)) {
    const fs::path dir(spec);
    if (fs::exists(dir / "dataset_dict.json", ec)) return dataset_dict_files(dir, split, key);
    if (fs::exists(dir / "state.json", ec)) return saved_dataset_files(dir);
    return shard_folder_files(dir, split, key);
  }
  if (is_glob(spec)) {
    std::vector<std::string> files = glob_files(spec);
    if (!files.empty()) return files;
  }
  throw ConfigError(key + ": '" + spec + "' matches no file");
}

std::vector<Row> read_columnar_rows(const std::string& path, bool arrow) {
  const std::vector<nlohmann::ordered_json> objects = arrow ? read_arrow_stream_rows(path) : read_parquet_rows(path);
  if (objects.empty()) throw ConfigError(path + ": the data file has no rows");
  std::vector<Row> rows(objects.size());
  for (std::size_t i = 0; i < objects.size(); ++i) {
    Row& row = rows[i];
    row.element = static_cast<int64_t>(i);
    for (auto it = objects[i].begin(); it != objects[i].end(); ++it) {
      const auto& v = it.value();
      row.is_string[it.key()] = v.is_string();
      if (v.is_null()) row.fields[it.key()] = std::nullopt;
      else if (v.is_string()) row.fields[it.key()] = v.get<std::string>();
      else row.fields[it.key()] = v.dump();
    }
  }
  return rows;
}

std::vector<Row> read_split_rows(const std::vector<std::string>& files, RowFormat format) {
  std::vector<Row> rows;
  for (const auto& f : files) {
    std::vector<Row> part = read_rows(f, format);
    for (auto& r : part) {
      if (files.size() > 1) r.file = f;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string files_identity(const std::vector<std::string>& files) {
  if (files.size() == 1) return std::to_string(hash_file_contents(files[0]));
  std::string id = std::to_string(files.size()) + " files:";
  for (const auto& f : files) id += " " + std::to_string(hash_file_contents(f));
  return id;
}

}  // namespace hftrain
