// Prompts files (predict --prompts), the data section's max_*_samples (HF DataTrainingArguments) and the
// eval / predict progress text.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <fstream>

#include "builtins/register_builtins.h"
#include "data/file_sources.h"
#include "data/prompts.h"
#include "data/sample_limits.h"
#include "log/progress.h"
#include "util/error.h"
#include "spec_test_helpers.h"

using namespace hftrain;
using namespace hftrain_test;
namespace fs = std::filesystem;

namespace {

std::string write_prompt_file(const std::string& name, const std::string& text) {
  auto dir = fs::temp_directory_path() / ("hftrain_unit_prompts_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("prompts files: one prompt per line or row and verbatim", "[unit][prompts]") {
  auto txt = read_prompts(write_prompt_file("p.txt", "ROMEO: \n\n  indented\r\nlast"), "text");
  REQUIRE(txt.size() == 3u);
  CHECK(txt[0].text == "ROMEO: ");
  CHECK(txt[1].text == "  indented");
  CHECK(txt[1].line == 3);
  CHECK(txt[2].text == "last");
  auto jsonl = read_prompts(write_prompt_file("p.jsonl", "{\"text\": \"a\\nb\", \"q\": \"x\"}\n\n{\"text\": \" c\", \"q\": \"y\"}\n"), "text");
  REQUIRE(jsonl.size() == 2u);
  CHECK(jsonl[0].text == "a\nb");
  CHECK(jsonl[1].text == " c");
  CHECK(read_prompts(write_prompt_file("q.jsonl", "{\"text\": \"a\", \"q\": \"x\"}\n"), "q").at(0).text == "x");
  CHECK(read_prompts(write_prompt_file("p.csv", "id,prompt\n1,\"hello, world\"\n"), "prompt").at(0).text == "hello, world");

  CHECK_THAT(config_error([] { read_prompts(write_prompt_file("m.jsonl", "{\"text\": \"a\"}\n{\"t\": \"b\"}\n"), "text"); }),
             Catch::Contains("m.jsonl:2: no field 'text'"));
  CHECK_THAT(config_error([] { read_prompts(write_prompt_file("n.jsonl", "{\"text\": 3}\n"), "text"); }),
             Catch::Contains("n.jsonl:1: field 'text' is not a string"));
  CHECK_THAT(config_error([] { read_prompts(write_prompt_file("e.jsonl", "{\"text\": \"\"}\n"), "text"); }),
             Catch::Contains("e.jsonl:1: field 'text' is an empty prompt"));
  CHECK_THAT(config_error([] { read_prompts(write_prompt_file("blank.txt", "\n  \n"), "text"); }), (Catch::Contains("holds no prompt") || Catch::Contains("is empty")) && Catch::Contains("blank.txt"));
  CHECK(read_prompts(write_prompt_file("blank3.txt", "\n  \nx\n \n"), "text").size() == 1u);  // blank lines are no prompts
  CHECK_THAT(config_error([] { read_prompts(write_prompt_file("blank4.jsonl", "\n"), "text"); }), Catch::Contains("blank4.jsonl"));
  CHECK_THAT(config_error([] { read_prompts("/nonexistent/prompts.txt", "text"); }), Catch::Contains("/nonexistent/prompts.txt"));
}

TEST_CASE("max_train_samples / max_eval_samples / max_predict_samples keep the first examples of their split",
          "[unit][prompts]") {
  const std::string train = write_prompt_file("train.jsonl", "{\"text\": \"aa\"}\n{\"text\": \"bbb\"}\n{\"text\": \"c\"}\n");
  FileDataSource::Options o;
  o.train_file = train;
  o.validation_file = train;
  o.cache_dir = (fs::temp_directory_path() / ("hftrain_unit_prompts_" + std::to_string(::getpid())) / "cache").string();
  auto source = std::make_unique<JsonlSource>(o);
  const auto full_train = source->split("train");
  SampleLimitedSource limited(std::move(source), SplitSampleLimits{2, std::nullopt, 1});
  REQUIRE(limited.split("train")->size() == 2);
  CHECK(limited.split("train")->get(1).input_ids == full_train->get(1).input_ids);
  const auto all_lengths = full_train->lengths("length");
  CHECK(limited.split("train")->lengths("length") == std::vector<int64_t>(all_lengths.begin(), all_lengths.begin() + 2));
  CHECK(limited.split("eval")->size() == 3);  // no limit
  CHECK(limited.split("test")->size() == 1);  // test = the eval file here
  CHECK_THROWS_AS(limited.split("train")->get(2), RuntimeFailure);
  CHECK(first_examples(full_train, 10) == full_train);  // fewer examples than the limit: all of them

  // In the spec: keys of the data section for every data type, validated and dumped.
  const std::string spec = write_prompt_file("spec.yaml", "model: {type: gpt, n_layer: 1}\n"
                                                   "data: {type: digit_reversal, max_train_samples: 5, max_predict_samples: 2}\n"
                                                   "training: {output_dir: out}\n");
  RunSpec s = load_run_spec(spec, {"data.max_eval_samples=3"}, builtin_components().catalog());
  CHECK(s.data_limits.max_train_samples == 5);
  CHECK(s.data_limits.max_eval_samples == 3);
  CHECK(s.data_limits.max_predict_samples == 2);
  CHECK_THAT(dump_run_spec(s, builtin_components().catalog()), Catch::Contains("max_predict_samples: 2"));
  CHECK_THAT(config_error([&] { load_run_spec(spec, {"data.max_eval_samples=0"}, builtin_components().catalog()); }),
             Catch::Contains("data.max_eval_samples"));
  CHECK_THAT(config_error([&] { load_run_spec(spec, {"data.max_test_samples=1"}, builtin_components().catalog()); }),
             Catch::Contains("data.max_test_samples"));
}

TEST_CASE("a missing data file no split in use reads is skipped, and one in use is an error", "[unit][prompts]") {
  FileDataSource::Options o;
  o.train_file = "/nonexistent/train.jsonl";
  o.validation_file = write_prompt_file("val.jsonl", "{\"text\": \"hello\"}\n");
  o.cache_dir = (fs::temp_directory_path() / ("hftrain_unit_prompts_" + std::to_string(::getpid())) / "cache").string();
  JsonlSource eval_only(o, DataUse{false, true, false});
  CHECK(eval_only.split("eval")->size() == 1);
  CHECK(eval_only.split("train")->size() == 0);
  JsonlSource tokenizer_only(o, DataUse{false, false, false});
  CHECK(tokenizer_only.tokenizer() != nullptr);
  CHECK_THAT(config_error([&] { JsonlSource all(o); }), Catch::Contains("/nonexistent/train.jsonl"));
}

TEST_CASE("eval / predict progress lines are titled and have no epoch", "[unit][prompts]") {
  ProgressSnapshot s;
  s.title = "predict";
  s.step = 5;
  s.total = 10;
  s.elapsed_seconds = 2.0;
  CHECK(progress_plain_line(s) == "predict 5/10 (50%) | 2.50it/s | 00:02 elapsed, 00:02 left");
  const std::string bar = progress_bar_line(s, 80, /*utf8=*/false);
  CHECK(bar.rfind("predict:  50%|", 0) == 0);
  CHECK(bar.find("epoch") == std::string::npos);
  CHECK(bar.size() <= 79u);
}

TEST_CASE("max_train_samples under training points to the data section", "[unit][prompts]") {
  const std::string spec = write_prompt_file("hint.yaml", "model: {type: gpt, n_layer: 1}\ndata: {type: digit_reversal}\n"
                                                   "training: {max_train_samples: 4}\n");
  CHECK_THAT(config_error([&] { load_run_spec(spec, {}, builtin_components().catalog()); }),
             Catch::Contains("in hftrain it is data.max_train_samples"));
}
