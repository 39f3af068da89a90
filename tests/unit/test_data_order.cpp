// Batches and orders of the data sources, against hand-computed values: dynamic padding, MLM masking statistics and
// reproducibility across a resume, hand-worked group_by_length and sortish orders, nanoGPT token files, the length
// column, and seq2seq rows (prefix, truncation, padding with -100, errors naming file, line and column).
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

TEST_CASE("collate pads to the longest with the pad id, masks attention and sets labels -100 on padding", "[unit][datasets]") {
  Example a, b;
  a.input_ids = {5, 6, 7};
  a.labels = {5, 6, 7};
  a.token_type_ids = {0, 0, 1};
  b.input_ids = {8};
  b.labels = {8};
  b.token_type_ids = {0};
  CollateOptions opts;
  opts.pad_id = 9;
  Batch batch = collate({a, b}, TaskKind::kCausalLm, opts);
  auto ids = batch.input_ids.accessor<int64_t, 2>();
  auto mask = batch.attention_mask.accessor<int64_t, 2>();
  auto lab = batch.labels.accessor<int64_t, 2>();
  auto tt = batch.token_type_ids.accessor<int64_t, 2>();
  REQUIRE(batch.input_ids.sizes() == torch::IntArrayRef({2, 3}));
  CHECK((std::vector<int64_t>{ids[1][0], ids[1][1], ids[1][2]}) == std::vector<int64_t>{8, 9, 9});
  CHECK((std::vector<int64_t>{mask[1][0], mask[1][1], mask[1][2]}) == std::vector<int64_t>{1, 0, 0});
  CHECK((std::vector<int64_t>{lab[1][0], lab[1][1], lab[1][2]}) == std::vector<int64_t>{8, -100, -100});
  CHECK((std::vector<int64_t>{tt[0][0], tt[0][1], tt[0][2]}) == std::vector<int64_t>{0, 0, 1});
  CHECK((std::vector<int64_t>{mask[0][0], mask[0][1], mask[0][2]}) == std::vector<int64_t>{1, 1, 1});

  a.label = 1;
  b.label = 0;
  a.token_type_ids.clear();
  b.token_type_ids.clear();
  Batch cls = collate({a, b}, TaskKind::kClassification, opts);
  CHECK(cls.labels.sizes() == torch::IntArrayRef({2}));
  CHECK(cls.labels[0].item<int64_t>() == 1);
  CHECK_FALSE(cls.token_type_ids.defined());
}

TEST_CASE("MLM masking selects 15% of ordinary tokens, 80/10/10, never special tokens or padding, seeded", "[unit][datasets]") {
  // 64 examples of 1 special + n ordinary + 1 special tokens, n from 100 to 163 (so padding exists).
  std::vector<Example> examples;
  for (int64_t i = 0; i < 64; ++i) {
    Example e;
    e.input_ids.push_back(1);
    e.special_tokens_mask.push_back(1);
    for (int64_t t = 0; t < 100 + i; ++t) {
      e.input_ids.push_back(10 + (t * 7 + i) % 900);
      e.special_tokens_mask.push_back(0);
    }
    e.input_ids.push_back(2);
    e.special_tokens_mask.push_back(1);
    examples.push_back(e);
  }
  CollateOptions opts;
  opts.pad_id = 0;
  opts.mask_id = 3;
  opts.vocab_size = 1000;
  Batch b = collate(examples, TaskKind::kMaskedLm, opts, 1234);
  auto ids = b.input_ids.accessor<int64_t, 2>();
  auto lab = b.labels.accessor<int64_t, 2>();
  int64_t eligible = 0, selected = 0, as_mask = 0, unchanged = 0, other = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const auto& e = examples[static_cast<std::size_t>(i)];
    for (int64_t t = 0; t < b.input_ids.size(1); ++t) {
      const bool real = t < static_cast<int64_t>(e.input_ids.size());
      const bool special = real && e.special_tokens_mask[static_cast<std::size_t>(t)] == 1;
      if (!real || special) {
        CHECK(lab[i][t] == -100);
        CHECK(ids[i][t] == (real ? e.input_ids[static_cast<std::size_t>(t)] : 0));
        continue;
      }
      ++eligible;
      const int64_t original = e.input_ids[static_cast<std::size_t>(t)];
      if (lab[i][t] == -100) {
        CHECK(ids[i][t] == original);
        continue;
      }
      CHECK(lab[i][t] == original);
      ++selected;
      if (ids[i][t] == 3) ++as_mask;
      else if (ids[i][t] == original) ++unchanged;
      else ++other;
    }
  }
  // eligible = sum(100..163) = 8416; binomial sd of the 15% share is about 0.004.
  REQUIRE(eligible == 8416);
  const double p = static_cast<double>(selected) / static_cast<double>(eligible);
  CHECK(p == Approx(0.15).margin(0.015));
  CHECK(static_cast<double>(as_mask) / static_cast<double>(selected) == Approx(0.8).margin(0.04));
  CHECK(static_cast<double>(other) / static_cast<double>(selected) == Approx(0.1).margin(0.03));
  CHECK(static_cast<double>(unchanged) / static_cast<double>(selected) == Approx(0.1).margin(0.03));

  Batch same = collate(examples, TaskKind::kMaskedLm, opts, 1234);
  CHECK(torch::equal(same.input_ids, b.input_ids));
  CHECK(torch::equal(same.labels, b.labels));
  Batch different = collate(examples, TaskKind::kMaskedLm, opts, 1235);
  CHECK_FALSE(torch::equal(different.labels, b.labels));
}

TEST_CASE("MLM masks of a resumed epoch equal those of the uninterrupted run", "[unit][datasets]") {
  const std::string dir = scratch("mlm_resume");
  std::string text;
  for (int i = 0; i < 24; ++i) text += std::string(static_cast<std::size_t>(5 + i % 7), static_cast<char>('a' + i % 26)) + "\n";
  write(dir + "/train.txt", text);
  auto o = base_options(dir, "train.txt");
  o.task = "masked_lm";
  FileDataSource src(o, RowFormat::kText, std::make_shared<TinyTokenizer>(), "tiny");
  DataLoader full(src.split("train"), TaskKind::kMaskedLm, 4, true, 7, false);
  full.start_epoch(1);
  std::vector<Batch> batches;
  for (Batch b; full.next(b);) batches.push_back(b);
  REQUIRE(batches.size() == 6);
  DataLoader resumed(src.split("train"), TaskKind::kMaskedLm, 4, true, 7, false);
  resumed.start_epoch(1, /*skip_samples=*/3 * 4);
  for (std::size_t k = 3; k < 6; ++k) {
    Batch b;
    REQUIRE(resumed.next(b));
    CHECK(torch::equal(b.input_ids, batches[k].input_ids));
    CHECK(torch::equal(b.labels, batches[k].labels));
  }
  // Different batches of the epoch are masked differently (the seed depends on the batch index).
  CHECK(batch_mask_seed(7, 1, 0) != batch_mask_seed(7, 1, 1));
  CHECK(batch_mask_seed(7, 1, 0) != batch_mask_seed(7, 2, 0));
}

TEST_CASE("group_by_length order for hand-worked cases", "[unit][datasets]") {
  // n = 8, batch 2: mega_batch_mult = min(8 / 8, 50) = 1, megabatches of 2 over the permutation
  // [5 0][7 2][4 1][6 3] -> sorted by length desc [5 0][7 2][1 4][3 6]; maxima 6 8 7 9 -> the last
  // holds the longest (index 3, length 9), which swaps places with 5.
  const std::vector<int64_t> lengths{3, 7, 1, 9, 4, 6, 2, 8};
  CHECK(length_grouped_indices(lengths, 2, {5, 0, 7, 2, 4, 1, 6, 3}) == std::vector<int64_t>{3, 0, 7, 2, 1, 4, 5, 6});
  // n = 16, batch 2: mult = 2, megabatches of 4, ties keep permutation order (Python's stable sort).
  const std::vector<int64_t> l2{1, 3, 3, 2, 5, 5, 1, 0, 2, 2, 9, 2, 4, 4, 4, 1};
  std::vector<int64_t> identity(16);
  for (int64_t i = 0; i < 16; ++i) identity[static_cast<std::size_t>(i)] = i;
  CHECK(length_grouped_indices(l2, 2, identity) ==
        std::vector<int64_t>{10, 2, 3, 0, 4, 5, 6, 7, 1, 8, 9, 11, 12, 13, 14, 15});
  // n = 3 < 4 * batch: one megabatch.
  CHECK(length_grouped_indices({1, 2, 3}, 4, {0, 1, 2}) == std::vector<int64_t>{2, 1, 0});
}

TEST_CASE("a group_by_length loader starts with the longest example and covers the epoch", "[unit][datasets]") {
  const std::string dir = scratch("grouped");
  std::string text;
  for (int i = 0; i < 40; ++i) text += std::string(static_cast<std::size_t>(1 + (i * 13) % 37), 'a') + "\n";
  write(dir + "/train.txt", text);
  FileDataSource src(base_options(dir, "train.txt"), RowFormat::kText);
  DataLoader loader(src.split("train"), TaskKind::kCausalLm, 4, true, 3, false);
  loader.group_by_length(4, "length");
  loader.start_epoch(0);
  auto first = loader.next_examples();
  REQUIRE(first.size() == 4);
  CHECK(first[0].input_ids.size() == 37);  // the longest line
  // Within the first megabatch (mult = min(40/16, 50) = 2 -> 8 examples) lengths descend after position 0.
  auto second = loader.next_examples();
  CHECK(first[3].input_ids.size() >= second[0].input_ids.size());
  int64_t count = 8;
  while (!loader.next_examples().empty()) count += 4;
  CHECK(count == 40);
}

TEST_CASE("token files: nanoGPT layout, sequential blocks, random windows, errors", "[unit][datasets]") {
  const std::string dir = scratch("tokens");
  {
    std::ofstream out(dir + "/train.bin", std::ios::binary);
    for (int v = 0; v < 100; ++v) {
      const unsigned char le[2] = {static_cast<unsigned char>(v * 3 & 0xff), static_cast<unsigned char>((v * 3) >> 8)};
      out.write(reinterpret_cast<const char*>(le), 2);
    }
    std::ofstream big(dir + "/val.bin", std::ios::binary);
    for (uint32_t v : {70000u, 1u, 2u, 65536u}) {
      const unsigned char le[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                   static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
      big.write(reinterpret_cast<const char*>(le), 4);
    }
  }
  TokenFileSource::Options o;
  o.train_file = dir + "/train.bin";
  o.vocab_size = 300;
  o.block_size = 8;
  TokenFileSource seq(o);
  auto train = seq.split("train");
  REQUIRE(train->size() == 12);  // 100 / 8, remainder of 4 dropped
  CHECK(train->get(3).input_ids == std::vector<int64_t>{72, 75, 78, 81, 84, 87, 90, 93});
  CHECK(train->get(3).labels == train->get(3).input_ids);
  CHECK(seq.shape().max_length == 8);
  CHECK(seq.split("eval") == nullptr);

  o.sampling = "random";
  o.num_random_blocks = 50;
  TokenFileSource rnd(o);
  auto windows = rnd.split("train");
  REQUIRE(windows->size() == 50);
  std::set<int64_t> starts;
  for (int64_t k = 0; k < 50; ++k) {
    auto ids = windows->get(k).input_ids;
    REQUIRE(ids.size() == 8);
    for (std::size_t t = 1; t < 8; ++t) CHECK(ids[t] == ids[t - 1] + 3);  // a contiguous window
    CHECK(ids[0] % 3 == 0);
    CHECK(ids[0] / 3 <= 92);
    starts.insert(ids[0]);
  }
  CHECK(starts.size() > 20);
  CHECK(TokenFileSource(o).split("train")->get(17).input_ids == windows->get(17).input_ids);

  TokenFileSource::Options w;
  w.train_file = dir + "/val.bin";
  w.dtype = "uint32";
  w.vocab_size = 70001;
  w.block_size = 2;
  TokenFileSource wide(w);
  CHECK(wide.split("train")->get(0).input_ids == std::vector<int64_t>{70000, 1});
  CHECK(wide.split("train")->get(1).input_ids == std::vector<int64_t>{2, 65536});
  w.vocab_size = 70000;
  CHECK_THROWS_WITH(TokenFileSource(w).split("train")->get(0), Catch::Contains("70000") && Catch::Contains("vocab_size"));

  write(dir + "/odd.bin", "abc");
  TokenFileSource::Options bad = o;
  bad.train_file = dir + "/odd.bin";
  CHECK_THAT(error_of([&] { TokenFileSource{bad}; }), Catch::Contains("odd.bin") && Catch::Contains("multiple of 2"));
  write(dir + "/empty.bin", "");
  bad.train_file = dir + "/empty.bin";
  CHECK_THAT(error_of([&] { TokenFileSource{bad}; }), Catch::Contains("empty"));
}

TEST_CASE("length_column_name reads an integer column of the training rows, else token counts", "[unit][datasets]") {
  const std::string dir = scratch("length_column");
  write(dir + "/train.jsonl",
        "{\"text\": \"abc\", \"n\": 7, \"tag\": \"x\"}\n{\"text\": \"d\", \"n\": 2, \"tag\": \"y\"}\n{\"text\": \"ef\", \"n\": 5, \"tag\": \"z\"}\n");
  auto o = base_options(dir, "train.jsonl");
  for (int load = 0; load < 2; ++load) {  // built, then from the cache
    FileDataSource src(o, RowFormat::kJsonl);
    CHECK(src.loaded_from_cache() == (load == 1));
    auto train = src.split("train");
    CHECK(train->lengths("n") == std::vector<int64_t>{7, 2, 5});
    CHECK(train->lengths("tag") == std::vector<int64_t>{3, 1, 2});     // not integers: token counts
    CHECK(train->lengths("length") == std::vector<int64_t>{3, 1, 2});  // absent: token counts
  }
}

TEST_CASE("seq2seq examples collate with the target padded to its own length with -100", "[unit][datasets]") {
  // HF DataCollatorForSeq2Seq: inputs padded with the pad id (attention mask 0), labels with -100.
  Example a, b;
  a.input_ids = {5, 6, 7, 1};
  a.labels = {7, 1};
  b.input_ids = {8, 1};
  b.labels = {9, 9, 9, 1};
  CollateOptions opts;
  opts.pad_id = 0;
  Batch batch = collate({a, b}, TaskKind::kSeq2Seq, opts);
  CHECK(batch.input_ids.equal(torch::tensor({5, 6, 7, 1, 8, 1, 0, 0}, torch::kLong).view({2, 4})));
  CHECK(batch.attention_mask.equal(torch::tensor({1, 1, 1, 1, 1, 1, 0, 0}, torch::kLong).view({2, 4})));
  CHECK(batch.labels.equal(torch::tensor({7, 1, -100, -100, 9, 9, 9, 1}, torch::kLong).view({2, 4})));
}

TEST_CASE("digit_reversal_seq2seq: the source digits and eos, the target their reversal and eos", "[unit][datasets]") {
  DigitReversalSeq2SeqSource::Options o;
  o.num_digits = 5;
  o.train_size = 50;
  DigitReversalSeq2SeqSource source(o);
  CHECK(source.task() == TaskKind::kSeq2Seq);
  CHECK(source.tokenizer()->special_tokens().pad == 0);
  CHECK(source.tokenizer()->special_tokens().eos == 1);
  // The same digits as digit_reversal's example (same seed, split and index), in T5's id layout.
  DigitReversalSource causal(o);
  const auto train = source.split("train");
  const auto causal_train = causal.split("train");
  for (int64_t i = 0; i < train->size(); ++i) {
    const Example ex = train->get(i), c = causal_train->get(i);
    REQUIRE(ex.input_ids.size() == 6);
    REQUIRE(ex.labels.size() == 6);
    CHECK(ex.input_ids.back() == 1);
    CHECK(ex.labels.back() == 1);
    CHECK(ex.prompt_length == 6);
    for (int64_t k = 0; k < 5; ++k) {
      CHECK(ex.input_ids[static_cast<std::size_t>(k)] == c.input_ids[static_cast<std::size_t>(k)] + 2);
      CHECK(ex.labels[static_cast<std::size_t>(k)] == ex.input_ids[static_cast<std::size_t>(4 - k)]);
    }
    const std::string src = source.tokenizer()->decode(ex.input_ids), tgt = source.tokenizer()->decode(ex.labels);
    CHECK(tgt == std::string(src.rbegin() + 1, src.rend()) + "$");
  }
}

TEST_CASE("seq2seq rows: the prefixed source and the target tokenized and truncated as run_translation does", "[unit][datasets][seq2seq]") {
  const std::string dir = scratch("seq2seq");
  write(dir + "/train.jsonl", "{\"en\": \"abc\", \"de\": \"xyz\", \"length\": 5}\n{\"en\": \"abcdefgh\", \"de\": \"uvwxyzab\", \"length\": 7}\n");
  write(dir + "/test.jsonl", "{\"en\": \"ab\"}\n{\"en\": \"cd\"}\n");
  auto tok = std::make_shared<TinyTokenizer>();
  FileDataSource::Options o = base_options(dir, "train.jsonl");
  o.test_file = dir + "/test.jsonl";
  o.task = "seq2seq";
  o.source_column = "en";
  o.target_column = "de";
  o.source_prefix = "t ";
  o.max_source_length = 6;
  o.max_target_length = 4;
  FileDataSource src(o, RowFormat::kJsonl, tok, "tiny");
  CHECK(src.task() == TaskKind::kSeq2Seq);
  auto train = src.split("train");
  REQUIRE(train->size() == 2);
  // [CLS] t a b c [SEP]: the prefix is part of the source (its space is no letter for this tokenizer).
  const int64_t t = 't' - 'a' + 4, a = 4, b = 5, c = 6;
  CHECK(train->get(0).input_ids == std::vector<int64_t>{1, t, a, b, c, 2});
  CHECK(train->get(0).labels == std::vector<int64_t>{1, 'x' - 'a' + 4, 'y' - 'a' + 4, 2});  // 5 tokens cut to 4
  CHECK(train->get(1).input_ids.size() == 6u);  // truncated to max_source_length, specials kept
  CHECK(train->get(1).labels == std::vector<int64_t>{1, 'u' - 'a' + 4, 'v' - 'a' + 4, 2});
  // A test file may leave out every target (nothing to score).
  auto test = src.split("test");
  REQUIRE(test->size() == 2);
  CHECK(test->get(0).labels.empty());
  CHECK(test->get(1).labels.empty());
  // The source columns are not offered as length columns; the integer column is.
  CHECK(train->lengths("length") == std::vector<int64_t>{5, 7});

  // Dynamic padding: to the longest source and the longest target of the batch, labels with -100.
  Example short_target = train->get(0);
  short_target.labels.resize(2);
  Batch dynamic = collate({train->get(0), short_target}, TaskKind::kSeq2Seq, train->collate_options());
  CHECK(dynamic.input_ids.sizes() == torch::IntArrayRef({2, 6}));
  CHECK(dynamic.labels.sizes() == torch::IntArrayRef({2, 4}));
  CHECK(dynamic.labels[1][2].item<int64_t>() == -100);
  // pad_to_max_length: fixed shapes [B, max_source_length] and [B, max_target_length].
  o.pad_to_max_length = true;
  o.max_source_length = 9;
  o.max_target_length = 7;
  FileDataSource padded(o, RowFormat::kJsonl, tok, "tiny");
  auto p = padded.split("train");
  Batch fixed = collate({p->get(0)}, TaskKind::kSeq2Seq, p->collate_options());
  CHECK(fixed.input_ids.sizes() == torch::IntArrayRef({1, 9}));
  CHECK(fixed.attention_mask.sum().item<int64_t>() == 6);
  CHECK(fixed.labels.sizes() == torch::IntArrayRef({1, 7}));
  CHECK(fixed.labels.ne(-100).sum().item<int64_t>() == 5);
}

TEST_CASE("seq2seq data errors name the file, line and column", "[unit][datasets][seq2seq]") {
  const std::string dir = scratch("seq2seq_errors");
  write(dir + "/train.jsonl", "{\"source\": \"abc\", \"target\": \"x\"}\n{\"source\": \"abc\"}\n");
  FileDataSource::Options o = base_options(dir, "train.jsonl");
  o.task = "seq2seq";
  auto tok = std::make_shared<TinyTokenizer>();
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl, tok, "tiny"); }),
             Catch::Contains("train.jsonl:2") && Catch::Contains("column 'target'") && Catch::Contains("missing column"));
  o.source_column = "src";
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl, tok, "tiny"); }),
             Catch::Contains("train.jsonl:1") && Catch::Contains("column 'src'"));
  // A test file with some targets needs all of them.
  o.source_column = "source";
  write(dir + "/train.jsonl", "{\"source\": \"abc\", \"target\": \"x\"}\n");
  write(dir + "/test.jsonl", "{\"source\": \"ab\", \"target\": \"x\"}\n{\"source\": \"cd\"}\n");
  o.test_file = dir + "/test.jsonl";
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl, tok, "tiny"); }),
             Catch::Contains("test.jsonl:2") && Catch::Contains("column 'target'"));
  o.test_file.clear();
  // One task's settings with another task would be ignored: refused.
  FileDataSource::Options lm = base_options(dir, "train.jsonl");
  lm.text_column = "source";
  lm.source_prefix = "summarize: ";
  CHECK_THAT(error_of([&] { FileDataSource(lm, RowFormat::kJsonl, tok, "tiny"); }),
             Catch::Contains("data.source_prefix: applies to task seq2seq, not causal_lm"));
  o.max_length = 16;
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl, tok, "tiny"); }),
             Catch::Contains("data.max_length") && Catch::Contains("max_source_length"));
  o.max_length = 0;
  write(dir + "/train.txt", "abc\n");
  FileDataSource::Options text = base_options(dir, "train.txt");
  text.task = "seq2seq";
  CHECK_THAT(error_of([&] { FileDataSource(text, RowFormat::kText, tok, "tiny"); }),
             Catch::Contains("a source and a target column"));
  o.source_column = "source";
  o.block_size = 8;
  CHECK_THAT(error_of([&] { FileDataSource(o, RowFormat::kJsonl, tok, "tiny"); }), Catch::Contains("not seq2seq"));
}

TEST_CASE("sortish order: chunks of 50 batches sorted by length, the longest batch first, the rest shuffled", "[unit][datasets][seq2seq]") {
  // batch 1 -> chunks of 50: positions 0-49 and 50-119 of the permutation. The longest example (length
  // 500, index 70) lies in the second chunk, so its batch moves to the front.
  const int64_t n = 120;
  std::vector<int64_t> lengths(n), perm(n);
  for (int64_t i = 0; i < n; ++i) {
    lengths[static_cast<std::size_t>(i)] = (i * 37) % 101;
    perm[static_cast<std::size_t>(i)] = (i * 7) % n;  // 7 and 120 are coprime: a permutation
  }
  lengths[70] = 500;
  const auto order = sortish_indices(lengths, 1, perm, 5);
  REQUIRE(order.size() == static_cast<std::size_t>(n));
  CHECK(std::set<int64_t>(order.begin(), order.end()).size() == static_cast<std::size_t>(n));
  CHECK(order[0] == 70);
  CHECK(sortish_indices(lengths, 1, perm, 5) == order);  // seeded
  CHECK(sortish_indices(lengths, 1, perm, 6) != order);

  // batch 4, one chunk: sorted descending, cut into batches of 4; batch 0 is the longest and stays first,
  // each batch keeps its sorted members, and the batches after it are a permutation of the others.
  const std::vector<int64_t> l2{3, 9, 1, 7, 5, 8, 2, 6, 4, 0};
  const std::vector<int64_t> p2{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto o2 = sortish_indices(l2, 4, p2, 1);
  REQUIRE(o2.size() == 10u);
  CHECK(std::vector<int64_t>(o2.begin(), o2.begin() + 4) == std::vector<int64_t>{1, 5, 3, 7});  // 9 8 7 6
  const std::vector<int64_t> b1{4, 8, 0, 6}, b2{2, 9};  // 5 4 3 2 and 1 0
  const std::vector<int64_t> rest(o2.begin() + 4, o2.end());
  const std::vector<int64_t> b1b2 = [&] { auto v = b1; v.insert(v.end(), b2.begin(), b2.end()); return v; }();
  const std::vector<int64_t> b2b1 = [&] { auto v = b2; v.insert(v.end(), b1.begin(), b1.end()); return v; }();
  CHECK((rest == b1b2 || rest == b2b1));
}
