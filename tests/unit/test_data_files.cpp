// Data files that are not JSON Lines: a JSON array of objects (datasets' json loader reads it) is read as rows
// that name their element and line, and gives the examples the same rows give as JSON Lines; files no row of
// which can be used (parquet bytes, chat `messages` rows without a chat template, one JSON object over many lines) are errors that say
// what the file is and offer on_bad_row: skip only when some row is good.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "data/file_sources.h"
#include "data/text_rows.h"
#include "util/error.h"
#include "scratch_files.h"

using hftrain_test::scratch;
using hftrain_test::write;
using hftrain_test::error_of;

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

FileDataSource::Options options_for(const std::string& dir, const std::string& train) {
  FileDataSource::Options o;
  o.train_file = dir + "/" + train;
  o.cache_dir = dir + "/cache";
  return o;
}

std::vector<std::vector<int64_t>> train_ids(const FileDataSource& src) {
  std::vector<std::vector<int64_t>> ids;
  auto train = src.split("train");
  for (int64_t i = 0; i < train->size(); ++i) ids.push_back(train->get(i).input_ids);
  return ids;
}

}  // namespace

TEST_CASE("a JSON array file is read as rows that know their element and line", "[unit][datasets]") {
  const std::string dir = scratch("array_rows");
  write(dir + "/a.json", "[\n  {\"text\": \"one\", \"n\": 1},\n  {\"text\": \"two\",\n   \"n\": null},\n  [3],\n"
                         "  {\"text\": \"[not, a, row]\"}\n]\n");
  auto rows = read_rows(dir + "/a.json", RowFormat::kJsonl);
  REQUIRE(rows.size() == 4);
  CHECK(*rows[0].fields.at("text") == "one");
  CHECK(*rows[0].fields.at("n") == "1");
  CHECK_FALSE(rows[0].is_string.at("n"));
  CHECK(rows[0].problem.empty());
  CHECK_FALSE(rows[1].fields.at("n").has_value());
  CHECK(*rows[3].fields.at("text") == "[not, a, row]");
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].element == static_cast<int64_t>(i));
  CHECK(rows[0].line == 2);
  CHECK(rows[1].line == 3);
  CHECK(rows[2].line == 5);
  CHECK(rows[3].line == 6);
  CHECK_THAT(rows[2].problem, Catch::Contains("expected a JSON object, got array"));
  CHECK(row_location("a.json", rows[2]) == "a.json:5 (element 2)");

  // On one line, with a byte-order mark: still an array.
  write(dir + "/b.json", "\xEF\xBB\xBF[{\"text\": \"x\"}, {\"text\": \"y\"}]");
  rows = read_rows(dir + "/b.json", RowFormat::kJsonl);
  REQUIRE(rows.size() == 2);
  CHECK(*rows[1].fields.at("text") == "y");
  CHECK(rows[1].line == 1);

  // JSON Lines whose first line is an array stays JSON Lines: that row is not an object.
  write(dir + "/c.jsonl", "[1, 2]\n{\"text\": \"x\"}\n");
  rows = read_rows(dir + "/c.jsonl", RowFormat::kJsonl);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].element == -1);
  CHECK_THAT(rows[0].problem, Catch::Contains("expected a JSON object"));

  // A malformed array is one error naming the file and the line.
  write(dir + "/d.json", "[\n  {\"text\": \"x\"},\n  {\"text\": \"y\"\n]\n");
  CHECK_THAT(error_of([&] { read_rows(dir + "/d.json", RowFormat::kJsonl); }),
             Catch::Contains("d.json:4: malformed JSON array"));
}

TEST_CASE("a JSON array file trains on the examples its rows give as JSON Lines", "[unit][datasets]") {
  const std::string dir = scratch("array_source");
  const char* texts[] = {"the cat sat", "on the mat", "", "a dog \\u00e9 ran", "far away"};
  std::string jsonl, array = "[\n";
  for (int i = 0; i < 5; ++i) {
    const std::string obj = std::string("{\"text\": \"") + texts[i] + "\", \"length\": " + std::to_string(10 + i) + "}";
    jsonl += obj + "\n";
    array += "  " + obj + (i < 4 ? ",\n" : "\n");
  }
  write(dir + "/train.jsonl", jsonl);
  write(dir + "/train.json", array + "]\n");
  const FileDataSource lines(options_for(dir, "train.jsonl"), RowFormat::kJsonl);
  const FileDataSource arr(options_for(dir, "train.json"), RowFormat::kJsonl);
  CHECK(train_ids(arr).size() == 4);  // the empty text gives no example
  CHECK(train_ids(arr) == train_ids(lines));
  CHECK(arr.split("train")->lengths("length") == std::vector<int64_t>{10, 11, 13, 14});

  // Errors in an element name the file, the line and the element.
  write(dir + "/bad.json", "[\n  {\"text\": \"ok\"},\n  {\"txt\": \"no\"}\n]\n");
  CHECK_THAT(error_of([&] { FileDataSource(options_for(dir, "bad.json"), RowFormat::kJsonl); }),
             Catch::Contains("bad.json:3 (element 1): column 'text': missing column") &&
                 Catch::Contains("on_bad_row: skip"));
}

TEST_CASE("a file no row of which can be used says what it is and does not offer skip", "[unit][datasets]") {
  const std::string dir = scratch("unusable");
  auto o = options_for(dir, "train.jsonl");

  // Parquet magic under a .jsonl name: read as parquet, and a corrupt one is refused as that, never a bad row
  // to skip.
  write(dir + "/train.jsonl", std::string("PAR1\x15\x04\x15\x30\x15\x2e\x4c\x15\x06\x15\x00\x12\x00\x00", 16) +
                                  "\n{\"text\": \"x\"}\nPAR1");
  for (const char* mode : {"error", "skip"}) {
    o.on_bad_row = mode;
    const std::string msg = error_of([&] { FileDataSource(o, RowFormat::kJsonl); });
    CHECK_THAT(msg, Catch::Contains("train.jsonl") && Catch::Contains("read as a parquet file"));
    CHECK_THAT(msg, !Catch::Contains("on_bad_row"));
  }
  write(dir + "/train.jsonl", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8));
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }), Catch::Contains("gzip"));

  // Chat rows are conversational data: without a chat template (the byte tokenizer has none), the error says
  // to give one.
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})";
  write(dir + "/train.jsonl", chat + "\n" + chat + "\n");
  for (const char* mode : {"error", "skip"}) {
    o.on_bad_row = mode;
    const std::string msg = error_of([&] { FileDataSource(o, RowFormat::kJsonl); });
    CHECK_THAT(msg, Catch::Contains("data.chat_template: the rows are conversational (column 'messages')"));
    CHECK_THAT(msg, !Catch::Contains("on_bad_row"));
  }
  // ShareGPT's conversations (from / value): the error says to rename them to TRL's messages.
  o.on_bad_row = "error";
  write(dir + "/train.jsonl", R"({"conversations": [{"from": "human", "value": "hi"}]})" "\n");
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }),
             Catch::Contains("rows have a `conversations` column (ShareGPT's from / value turns): hftrain reads "
                             "conversations from a `messages` column"));
  // Other columns than the spec names: they are listed with the option to set.
  write(dir + "/train.jsonl", "{\"sentence\": \"a\", \"id\": 1}\n");
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }),
             Catch::Contains("no row has the column 'text' (data.text_column); the rows have 'id', 'sentence'"));
  // One good row among them: the bad row is an error that offers skip, and skip trains on the good one.
  write(dir + "/train.jsonl", "{\"text\": \"plain\"}\n" + chat + "\n");
  o.on_bad_row = "error";
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl); }),
             Catch::Contains("train.jsonl:2: column 'text': missing column (on_bad_row: skip skips such rows)"));
  o.on_bad_row = "skip";
  const FileDataSource skipped(o, RowFormat::kJsonl);
  CHECK(skipped.skipped_rows() == 1);
  CHECK(skipped.split("train")->size() == 1);

  // One JSON object over many lines, its rows under a key: named as such.
  write(dir + "/train.json", "{\n  \"version\": 1,\n  \"data\": [\n    {\"text\": \"a\"},\n    {\"text\": \"b\"}\n  ]\n}\n");
  CHECK_THAT(error_of([&] { FileDataSource(options_for(dir, "train.json"), RowFormat::kJsonl); }),
             Catch::Contains("train.json: the file is one JSON object over 7 lines") &&
                 Catch::Contains("key 'data' holds a list of 2 objects"));
}
