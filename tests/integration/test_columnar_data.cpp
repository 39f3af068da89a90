// Parquet files and datasets' Arrow folders written by independent writers (tests/reference/
// columnar_fixtures.js: parquet-wasm, i.e. the Rust parquet crate, and Arrow's JavaScript stream writer) read
// back as the rows they hold: every codec, data page v1 / v2, dictionary / plain / DELTA encodings (and the old
// PLAIN_DICTIONARY id, on the writer's dictionary file relabelled), several row groups and pages, nulls,
// list<string> and list<struct<role, content>>; save_to_disk folders in state.json's order (also with
// zstd-compressed record batches), DatasetDict splits, Hub shard folders. Through the binary: corrupt files
// refused (exit 2, naming file and column, nothing written) and a tiny gpt trained on parquet rows logs the
// losses of the same rows as jsonl. Skipped, with the reason, where node or the npm packages
// (scripts/install-deps.sh) are missing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "columnar/arrow_stream.h"
#include "columnar/parquet_reader.h"
#include "data/data_files.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Writes the fixtures into `dir`; false (after printing the skip line) where the writers are missing.
bool write_fixtures(const std::string& dir) {
  const char* env = std::getenv("HFTRAIN_NPM_DIR");
  const std::string modules = std::string(env && *env ? env : "/opt/hftrain-npm") + "/node_modules";
  if (run_shell("command -v node >/dev/null 2>&1").exit_code != 0 || !fs::exists(modules + "/parquet-wasm") ||
      !fs::exists(modules + "/apache-arrow")) {
    std::cout << "HFTRAIN_TEST_SKIPPED: node or the npm packages parquet-wasm / apache-arrow (scripts/install-deps.sh, "
              << modules << ") are missing; no independent writer for the fixtures\n";
    return false;
  }
  const CliResult r = run_shell("NODE_PATH='" + modules + "' node '" + std::string(HFTRAIN_SOURCE_DIR) +
                                "/tests/reference/columnar_fixtures.js' '" + dir + "' 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return true;
}

json as_json(const std::vector<nlohmann::ordered_json>& rows) { return json::parse(nlohmann::ordered_json(rows).dump()); }

std::vector<nlohmann::ordered_json> arrow_rows(const std::vector<std::string>& files) {
  std::vector<nlohmann::ordered_json> rows;
  for (const auto& f : files)
    for (auto& r : hftrain::read_arrow_stream_rows(f)) rows.push_back(std::move(r));
  return rows;
}

json slice(const json& rows, std::size_t from, std::size_t to) {
  json out = json::array();
  for (std::size_t i = from; i < to; ++i) out.push_back(rows[i]);
  return out;
}

}  // namespace

TEST_CASE("parquet files of an independent writer read as the rows it wrote", "[integration][columnar]") {
  const std::string dir = fresh_dir("columnar_parquet");
  if (!write_fixtures(dir)) return;
  const json expected = json::parse(read_text(dir + "/expected.json"));
  int cases = 0;
  for (const auto& e : fs::directory_iterator(dir + "/parquet")) {
    INFO(e.path().string());
    const auto rows = hftrain::read_parquet_rows(e.path().string());
    CHECK(as_json(rows) == expected);
    std::vector<std::string> keys;  // the writer's column order
    for (auto it = rows.at(0).begin(); it != rows.at(0).end(); ++it) keys.push_back(it.key());
    CHECK(keys == std::vector<std::string>{"text", "id", "small", "score", "flag", "ratio", "tags", "messages", "label"});
    ++cases;
  }
  CHECK(cases == 7);  // six writer settings and the PLAIN_DICTIONARY relabelling

  // A Hub dataset folder: data/train-0000N-of-00002.parquet in order, validation-* for the validation split.
  const auto train = hftrain::resolve_data_files(dir + "/hub", "train", "data.train_file");
  REQUIRE(train.size() == 2);
  CHECK(train[0] == dir + "/hub/data/train-00000-of-00002.parquet");
  const auto validation = hftrain::resolve_data_files(dir + "/hub", "validation", "data.validation_file");
  REQUIRE(validation.size() == 1);
  CHECK(hftrain::read_split_rows(train, hftrain::RowFormat::kParquet).size() == 30);
  CHECK(as_json(hftrain::read_parquet_rows(validation[0])) == slice(expected, 30, 37));
  CHECK_THROWS_WITH(hftrain::resolve_data_files(dir + "/hub", "test", "data.test_file"),
                    Catch::Contains("data.test_file") && Catch::Contains("no test data files"));
  // A glob names the same shards.
  CHECK(hftrain::resolve_data_files(dir + "/hub/data/train-*.parquet", "train", "data.train_file") == train);
}

TEST_CASE("datasets save_to_disk folders and DatasetDicts read in state.json's order", "[integration][columnar]") {
  const std::string dir = fresh_dir("columnar_arrow");
  if (!write_fixtures(dir)) return;
  const json expected = json::parse(read_text(dir + "/expected.json"));
  const auto saved = hftrain::resolve_data_files(dir + "/saved", "train", "data.train_file");
  REQUIRE(saved.size() == 2);
  CHECK(as_json(arrow_rows(saved)) == expected);
  // state.json lists the second shard first: its rows come first.
  const auto reordered = hftrain::resolve_data_files(dir + "/saved_reordered", "train", "data.train_file");
  json swapped = slice(expected, 19, 37);
  for (const auto& r : slice(expected, 0, 19)) swapped.push_back(r);
  CHECK(as_json(arrow_rows(reordered)) == swapped);
  // A DatasetDict: its train and validation folders; a split it lacks is named with the splits it has.
  CHECK(as_json(arrow_rows(hftrain::resolve_data_files(dir + "/dict", "train", "k"))) == slice(expected, 0, 30));
  CHECK(as_json(arrow_rows(hftrain::resolve_data_files(dir + "/dict", "validation", "k"))) == slice(expected, 30, 37));
  CHECK_THROWS_WITH(hftrain::resolve_data_files(dir + "/dict", "test", "data.test_file"),
                    Catch::Contains("no test split") && Catch::Contains("train, validation"));
  // The same rows in record batches whose buffers Arrow's writer compressed with zstd (some stored raw, length
  // -1, where zstd did not shrink them); written only where the zstd command is installed.
  if (fs::exists(dir + "/zstd/state.json"))
    CHECK(as_json(arrow_rows(hftrain::resolve_data_files(dir + "/zstd", "train", "data.train_file"))) == expected);
  else
    WARN("the zstd command is missing: no zstd-compressed Arrow fixture");
  // Rows as the data layer keeps them: strings, null, and the JSON text of lists of structs.
  const auto rows = hftrain::read_split_rows(saved, hftrain::RowFormat::kArrow);
  REQUIRE(rows.size() == 37);
  const auto ordered = nlohmann::ordered_json::parse(read_text(dir + "/expected.json"));
  CHECK(*rows[1].fields.at("messages") == ordered[1]["messages"].dump());  // keys in the writer's order
  CHECK_FALSE(rows[3].fields.at("text").has_value());
  CHECK(hftrain::row_location("x", rows[20]) == saved[1] + " (row 1)");
}

TEST_CASE("corrupt parquet and Arrow files are refused through the CLI naming file and column", "[integration][columnar]") {
  const std::string dir = fresh_dir("columnar_corrupt");
  if (!write_fixtures(dir)) return;
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: parquet, train_file: corrupt/damaged_page.parquet, cache_dir: cache}
training: {output_dir: out, max_steps: 2, report_to: none, save_strategy: "no"}
)");
  const CliResult damaged = run_hftrain("train spec.yaml", dir);
  INFO(damaged.output);
  CHECK(damaged.exit_code == 2);
  CHECK_THAT(damaged.output, Catch::Contains("damaged_page.parquet") && Catch::Contains("column 'text'"));
  for (const char* file : {"corrupt/truncated.parquet", "corrupt/bad_magic.parquet", "corrupt/truncated.arrow"}) {
    const CliResult r = run_hftrain(std::string("train spec.yaml --set data.type=jsonl --set data.train_file=") + file, dir);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(file));
  }
  CHECK_FALSE(fs::exists(dir + "/out"));
}

TEST_CASE("a tiny gpt trains on parquet rows with the losses of the same rows as jsonl", "[integration][columnar]") {
  const std::string dir = fresh_dir("columnar_train");
  if (!write_fixtures(dir)) return;
  write_text(dir + "/spec.yaml", R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: jsonl, train_file: lm.jsonl, block_size: 16, cache_dir: cache}
training: {output_dir: out_jsonl, per_device_train_batch_size: 4, max_steps: 6, learning_rate: 0.003, logging_steps: 1,
           save_strategy: "no", report_to: none, seed: 3}
)");
  const CliResult a = run_hftrain("train spec.yaml", dir);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  const CliResult b = run_hftrain("train spec.yaml --set data.type=parquet --set data.train_file=lm.parquet "
                                  "--set training.output_dir=out_parquet", dir);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  const auto jsonl_losses = logged_losses(dir + "/out_jsonl/trainer_state.json");
  REQUIRE(jsonl_losses.size() == 6);
  CHECK(logged_losses(dir + "/out_parquet/trainer_state.json") == jsonl_losses);
}
