// File datasets (jsonl / csv / tsv / text), the tokenized-dataset cache and the ratio split, against hand-computed
// values: byte-tokenizer ids, group_texts packing boundaries, HF label ordering, text pairs, bad rows named by
// file:line and column, cache hits and invalidation. (Collation, MLM masking, orders, token files and seq2seq rows:
// test_data_order.cpp.)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "data/builtin_sources.h"
#include "data/dataset_cache.h"
#include "data/file_sources.h"
#include "data/loader.h"
#include "data/text_rows.h"
#include "data/token_file_source.h"
#include "util/error.h"
#include "dataset_fixtures.h"
#include "scratch_files.h"

using hftrain_test::scratch;
using hftrain_test::write;
using hftrain_test::error_of;

using namespace hftrain;
namespace fs = std::filesystem;
using hftrain_test::base_options;
using hftrain_test::bytes_of;
using hftrain_test::TinyTokenizer;

TEST_CASE("jsonl causal_lm rows become byte ids with labels equal to the inputs", "[unit][datasets]") {
  const std::string dir = scratch("jsonl_ids");
  write(dir + "/train.jsonl", "{\"text\": \"ab\"}\n\n{\"text\": \"c\\u00e9\", \"other\": 1}\n");
  FileDataSource src(base_options(dir, "train.jsonl"), RowFormat::kJsonl);
  auto train = src.split("train");
  REQUIRE(train->size() == 2);
  CHECK(train->get(0).input_ids == std::vector<int64_t>{97, 98});
  CHECK(train->get(1).input_ids == std::vector<int64_t>{99, 0xC3, 0xA9});  // U+00E9 as UTF-8 bytes
  CHECK(train->get(1).labels == train->get(1).input_ids);
  CHECK(src.split("eval") == nullptr);
  CHECK(src.shape().vocab_size == 256);
  CHECK(src.shape().max_length == 3);
  CHECK(src.task() == TaskKind::kCausalLm);
}

TEST_CASE("packing cuts the concatenated rows into block_size blocks and drops the remainder as group_texts", "[unit][datasets]") {
  const std::string dir = scratch("packing");
  write(dir + "/train.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"de\"}\n{\"text\": \"fghij\"}\n");
  write(dir + "/val.jsonl", "{\"text\": \"xyz\"}\n{\"text\": \"w\"}\n");
  auto o = base_options(dir, "train.jsonl");
  o.validation_file = dir + "/val.jsonl";
  o.block_size = 4;
  FileDataSource src(o, RowFormat::kJsonl);
  // "abcdefghij" (10 tokens) -> [abcd] [efgh]; "ij" dropped. "xyzw" -> one block.
  auto train = src.split("train");
  REQUIRE(train->size() == 2);
  CHECK(train->get(0).input_ids == bytes_of("abcd"));
  CHECK(train->get(1).input_ids == bytes_of("efgh"));
  CHECK(train->get(1).labels == bytes_of("efgh"));
  auto eval = src.split("eval");
  REQUIRE(eval->size() == 1);
  CHECK(eval->get(0).input_ids == bytes_of("xyzw"));
  CHECK(src.split("test")->size() == 1);  // no test_file: the evaluation split
  CHECK(src.shape().max_length == 4);
}

TEST_CASE("masked_lm packing keeps the special-tokens mask aligned with the ids", "[unit][datasets]") {
  const std::string dir = scratch("mlm_pack");
  write(dir + "/train.txt", "ab\nc\n");
  auto o = base_options(dir, "train.txt");
  o.task = "masked_lm";
  o.block_size = 3;
  auto tok = std::make_shared<TinyTokenizer>();
  FileDataSource src(o, RowFormat::kText, tok, "tiny");
  // [CLS] a b [SEP] [CLS] c [SEP] = 1 4 5 2 1 6 2 -> [1 4 5] [2 1 6], remainder [2] dropped.
  auto train = src.split("train");
  REQUIRE(train->size() == 2);
  CHECK(train->get(0).input_ids == std::vector<int64_t>{1, 4, 5});
  CHECK(train->get(0).special_tokens_mask == std::vector<int64_t>{1, 0, 0});
  CHECK(train->get(1).input_ids == std::vector<int64_t>{2, 1, 6});
  CHECK(train->get(1).special_tokens_mask == std::vector<int64_t>{1, 1, 0});
  CHECK(train->get(0).labels.empty());  // made by the collator
  CHECK(src.task() == TaskKind::kMaskedLm);
  CHECK(train->collate_options().mask_id == 3);
  CHECK(train->collate_options().pad_id == 0);
}

TEST_CASE("masked_lm refuses a tokenizer without a mask token", "[unit][datasets]") {
  const std::string dir = scratch("mlm_bytes");
  write(dir + "/train.txt", "abc\n");
  auto o = base_options(dir, "train.txt");
  o.task = "masked_lm";
  CHECK_THAT(error_of([&] { FileDataSource{o, RowFormat::kText}; }), Catch::Contains("mask token"));
}

TEST_CASE("classification labels are the sorted unique training labels, numeric when all are integers", "[unit][datasets]") {
  const std::string dir = scratch("labels");
  write(dir + "/train.csv", "sentence,label\nab,pos\nc,neg\n\"d, \"\"e\"\"\",neutral\nf,pos\n");
  auto o = base_options(dir, "train.csv");
  o.text_column = "sentence";
  o.task = "sequence_classification";
  o.max_length = 3;
  FileDataSource src(o, RowFormat::kCsv);
  CHECK(src.shape().label_names == std::vector<std::string>{"neg", "neutral", "pos"});
  CHECK(src.shape().num_labels == 3);
  auto train = src.split("train");
  REQUIRE(train->size() == 4);
  CHECK(train->get(0).label == 2);
  CHECK(train->get(1).label == 0);
  CHECK(train->get(2).label == 1);
  CHECK(train->get(2).input_ids == bytes_of("d, "));  // quoted field, truncated to max_length 3
  CHECK(src.default_metrics() == std::vector<std::string>{"accuracy"});

  write(dir + "/num.tsv", "text\tlabel\na\t10\nb\t2\nc\t1\n");
  auto n = base_options(dir, "num.tsv");
  n.task = "sequence_classification";
  FileDataSource num(n, RowFormat::kTsv);
  CHECK(num.shape().label_names == std::vector<std::string>{"1", "2", "10"});
  CHECK(num.split("train")->get(0).label == 2);
}

TEST_CASE("text pairs get token_type_ids and a given label set fixes the ids", "[unit][datasets]") {
  const std::string dir = scratch("pairs");
  write(dir + "/train.jsonl", "{\"q\": \"ab\", \"p\": \"c\", \"y\": 1}\n{\"q\": \"d\", \"p\": \"ef\", \"y\": 0}\n");
  auto o = base_options(dir, "train.jsonl");
  o.task = "sequence_classification";
  o.text_column = "q";
  o.text_pair_column = "p";
  o.label_column = "y";
  o.label_names = {"1", "0"};
  auto tok = std::make_shared<TinyTokenizer>();
  FileDataSource src(o, RowFormat::kJsonl, tok, "tiny");
  auto e = src.split("train")->get(0);
  CHECK(e.input_ids == std::vector<int64_t>{1, 4, 5, 2, 6, 2});
  CHECK(e.token_type_ids == std::vector<int64_t>{0, 0, 0, 0, 1, 1});
  CHECK(e.label == 0);
  CHECK(src.split("train")->get(1).label == 1);
}

TEST_CASE("bad rows are errors naming file, line and column, or are skipped and counted", "[unit][datasets]") {
  const std::string dir = scratch("bad_rows");
  auto o = base_options(dir, "train.jsonl");
  o.task = "sequence_classification";
  o.validation_file = dir + "/val.jsonl";
  write(dir + "/train.jsonl", "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"y\"}\n");

  write(dir + "/val.jsonl", "{\"text\": \"a\", \"label\": \"x\"}\n\n{\"text\": \"b\", \"label\": \"z\"}\n");
  std::string msg = error_of([&] { FileDataSource{o, RowFormat::kJsonl}; });
  CHECK_THAT(msg, Catch::Contains("val.jsonl:3") && Catch::Contains("column 'label'") && Catch::Contains("'z'"));

  write(dir + "/val.jsonl", "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"y\"\n");
  msg = error_of([&] { FileDataSource{o, RowFormat::kJsonl}; });
  CHECK_THAT(msg, Catch::Contains("val.jsonl:2") && Catch::Contains("malformed JSON"));

  write(dir + "/val.jsonl", "{\"label\": \"x\"}\n");
  msg = error_of([&] { FileDataSource{o, RowFormat::kJsonl}; });
  CHECK_THAT(msg, Catch::Contains("val.jsonl:1") && Catch::Contains("column 'text'") && Catch::Contains("missing"));

  write(dir + "/val.jsonl", "{\"text\": \"ok\", \"label\": \"x\"}\n{\"text\": \"a\xff\", \"label\": \"x\"}\n");
  msg = error_of([&] { FileDataSource{o, RowFormat::kJsonl}; });
  CHECK_THAT(msg, Catch::Contains("val.jsonl:2") && Catch::Contains("UTF-8"));

  write(dir + "/val.jsonl", "  \n");
  msg = error_of([&] { FileDataSource{o, RowFormat::kJsonl}; });
  CHECK_THAT(msg, Catch::Contains("val.jsonl") && Catch::Contains("empty"));

  // csv: invalid UTF-8 is named by its column
  write(dir + "/t.csv", "text,label\na,x\n\"b\xc3\",y\n");
  auto c = base_options(dir, "t.csv");
  c.task = "sequence_classification";
  msg = error_of([&] { FileDataSource{c, RowFormat::kCsv}; });
  CHECK_THAT(msg, Catch::Contains("t.csv:3") && Catch::Contains("column 'text'") && Catch::Contains("UTF-8"));

  // skip: four bad rows of five are counted, the good one stays
  write(dir + "/val.jsonl",
        "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"z\"}\nnot json\n{\"label\": \"x\"}\n"
        "{\"text\": 5, \"label\": \"x\"}\n");
  o.on_bad_row = "skip";
  FileDataSource skipped(o, RowFormat::kJsonl);
  CHECK(skipped.skipped_rows() == 4);
  CHECK(skipped.split("eval")->size() == 1);
}

TEST_CASE("text files are one row per line and csv quoting spans lines", "[unit][datasets]") {
  CHECK(is_valid_utf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  CHECK_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  const std::string dir = scratch("rows");
  write(dir + "/a.txt", "one\r\n\ntwo");
  auto rows = read_rows(dir + "/a.txt", RowFormat::kText);
  REQUIRE(rows.size() == 3);
  CHECK(*rows[0].fields.at("text") == "one");
  CHECK(*rows[1].fields.at("text") == "");
  CHECK(rows[2].line == 3);
  write(dir + "/b.csv", "text,label\n\"multi\nline\",1\nnext,2\n");
  rows = read_rows(dir + "/b.csv", RowFormat::kCsv);
  REQUIRE(rows.size() == 2);
  CHECK(*rows[0].fields.at("text") == "multi\nline");
  CHECK(rows[0].line == 2);
  CHECK(rows[1].line == 4);
  write(dir + "/c.csv", "text,label\na,1,extra\n");
  rows = read_rows(dir + "/c.csv", RowFormat::kCsv);
  REQUIRE(rows.size() == 1);
  CHECK_THAT(rows[0].problem, Catch::Contains("expected 2 fields"));
}

TEST_CASE("a ratio split holds out ceil(p% of rows), seeded, and no row is lost", "[unit][datasets]") {
  const std::string dir = scratch("ratio");
  std::string text;
  for (char c = 'a'; c < 'a' + 20; ++c) text += std::string(1, c) + "\n";
  write(dir + "/train.txt", text);
  auto o = base_options(dir, "train.txt");
  o.validation_split_percentage = 21;  // ceil(4.2) = 5
  auto held_out = [&](int64_t seed) {
    o.split_seed = seed;
    FileDataSource src(o, RowFormat::kText);
    std::string all;
    for (int64_t i = 0; i < src.split("train")->size(); ++i) all += static_cast<char>(src.split("train")->get(i).input_ids[0]);
    std::string eval;
    for (int64_t i = 0; i < src.split("eval")->size(); ++i) eval += static_cast<char>(src.split("eval")->get(i).input_ids[0]);
    std::string sorted = all + eval;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == "abcdefghijklmnopqrst");
    CHECK(eval.size() == 5);
    return eval;
  };
  CHECK(held_out(1) == held_out(1));
  CHECK(held_out(1) != held_out(2));
}

TEST_CASE("the cache is reused on a second load and invalidated by content or setting changes", "[unit][datasets]") {
  const std::string dir = scratch("cache");
  write(dir + "/train.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"de\"}\n");
  auto o = base_options(dir, "train.jsonl");
  auto tok = std::make_shared<TinyTokenizer>();
  {
    FileDataSource first(o, RowFormat::kJsonl, tok, "tiny");
    CHECK(first.tokenized_rows() == 2);
    CHECK_FALSE(first.loaded_from_cache());
    CHECK(fs::exists(first.cache_file()));
    CHECK(tok->calls == 2);
  }
  {
    FileDataSource second(o, RowFormat::kJsonl, tok, "tiny");
    CHECK(second.loaded_from_cache());
    CHECK(second.tokenized_rows() == 0);
    CHECK(tok->calls == 2);  // the tokenizer was not called again
    CHECK(second.split("train")->get(1).input_ids == std::vector<int64_t>{1, 7, 8, 2});
  }
  // Same size, different content: a miss.
  write(dir + "/train.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"dd\"}\n");
  {
    FileDataSource changed(o, RowFormat::kJsonl, tok, "tiny");
    CHECK_FALSE(changed.loaded_from_cache());
    CHECK(changed.split("train")->get(1).input_ids == std::vector<int64_t>{1, 7, 7, 2});
  }
  // A setting that changes the examples: a miss; another tokenizer identity: a miss.
  o.max_length = 3;
  CHECK_FALSE(FileDataSource(o, RowFormat::kJsonl, tok, "tiny").loaded_from_cache());
  CHECK_FALSE(FileDataSource(o, RowFormat::kJsonl, tok, "tiny-v2").loaded_from_cache());
  CHECK(FileDataSource(o, RowFormat::kJsonl, tok, "tiny-v2").loaded_from_cache());
  // A damaged cache file reads as a miss and is rebuilt.
  FileDataSource again(o, RowFormat::kJsonl, tok, "tiny-v2");
  write(again.cache_file(), "HFTDSC02garbage");
  FileDataSource rebuilt(o, RowFormat::kJsonl, tok, "tiny-v2");
  CHECK_FALSE(rebuilt.loaded_from_cache());
  CHECK(rebuilt.split("train")->get(0).input_ids == std::vector<int64_t>{1, 4, 2});
}
