// Generation settings: the forbidding processors on hand-made rows, the cache row selection beam search
// relies on, settings that cannot work (refused with the option's name), and the generation section of a
// run spec. Beam search's results are checked against an independent Python beam search in
// tests/reference/beam_search_reference.py.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "builtins/register_builtins.h"
#include "generate/beam_search.h"
#include "generate/generate.h"
#include "util/error.h"

using namespace hftrain;

namespace {

std::string refusal(const GenerationConfig& c) {
  try {
    validate_generation_config(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::vector<int64_t> forbidden(const torch::Tensor& row) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < row.size(0); ++t)
    if (std::isinf(row[t].item<float>())) out.push_back(t);
  return out;
}

std::string spec_error(const std::string& generation_yaml) {
  auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_generation_spec_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "spec.yaml").string();
  std::ofstream(path) << "model: {type: gpt, n_layer: 1}\ndata: {type: digit_reversal}\ntraining: {output_dir: /tmp/x}\n"
                      << "generation: " << generation_yaml << "\n";
  try {
    load_run_spec(path, {}, builtin_components().catalog());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("no_repeat_ngram_size and min_new_tokens forbid exactly the tokens HF's processors forbid", "[unit][generate]") {
  GenerationConfig c;
  auto scores = torch::zeros({3, 8});
  // Row 0: 1 2 3 1 2, n = 3: the last two tokens (1 2) were followed by 3 before -> 3 is forbidden.
  // Row 1: 4 5 4 5 4, n = 3: (5 4) was followed by 5 -> 5.   Row 2: 6 7, n = 3: no earlier (6 7) -> none.
  c.no_repeat_ngram_size = 3;
  mask_forbidden_tokens(scores, {{1, 2, 3, 1, 2}, {4, 5, 4, 5, 4}, {6, 7}}, 2, c);
  CHECK(forbidden(scores[0]) == std::vector<int64_t>{3});
  CHECK(forbidden(scores[1]) == std::vector<int64_t>{5});
  CHECK(forbidden(scores[2]).empty());

  // n = 2: after 1 2 3 1 2 the last token 2 was followed by 3 -> 3. n = 1: every token seen is forbidden.
  scores = torch::zeros({1, 8});
  c.no_repeat_ngram_size = 2;
  mask_forbidden_tokens(scores, {{1, 2, 3, 1, 2}}, 2, c);
  CHECK(forbidden(scores[0]) == std::vector<int64_t>{3});
  scores = torch::zeros({1, 8});
  c.no_repeat_ngram_size = 1;
  mask_forbidden_tokens(scores, {{1, 2, 3, 1, 2}}, 2, c);
  CHECK(forbidden(scores[0]) == std::vector<int64_t>{1, 2, 3});

  // min_new_tokens 2 with a prompt of 3: eos (7) is forbidden after 0 and 1 generated tokens, not after 2.
  c.no_repeat_ngram_size = 0;
  c.min_new_tokens = 2;
  c.eos_token_id = 7;
  scores = torch::zeros({3, 8});
  mask_forbidden_tokens(scores, {{0, 1, 2}, {0, 1, 2, 5}, {0, 1, 2, 5, 6}}, 3, c);
  CHECK(forbidden(scores[0]) == std::vector<int64_t>{7});
  CHECK(forbidden(scores[1]) == std::vector<int64_t>{7});
  CHECK(forbidden(scores[2]).empty());
  // Without an eos token min_new_tokens has nothing to forbid (as in HF, which then adds no processor).
  c.eos_token_id.reset();
  scores = torch::zeros({1, 8});
  mask_forbidden_tokens(scores, {{0, 1, 2}}, 3, c);
  CHECK(forbidden(scores[0]).empty());
}

TEST_CASE("KvCache::keep_rows gives each beam its parent's keys and values", "[unit][generate]") {
  KvCache cache;
  auto k = torch::arange(3 * 2 * 4 * 2, torch::kFloat).view({3, 2, 4, 2});
  cache.append(0, k, k + 1000);
  cache.append(1, k * 2, k * 2 + 1000);
  cache.length = 4;
  cache.keep_rows(torch::tensor(std::vector<int64_t>{2, 0, 0, 1}));
  REQUIRE(cache.keys[0].size(0) == 4);
  CHECK(torch::equal(cache.keys[0][0], k[2]));
  CHECK(torch::equal(cache.keys[0][1], k[0]));
  CHECK(torch::equal(cache.keys[0][2], k[0]));
  CHECK(torch::equal(cache.keys[1][3], k[1] * 2));
  CHECK(torch::equal(cache.values[1][0], k[2] * 2 + 1000));
  CHECK(cache.length == 4);
}

TEST_CASE("generation settings that cannot work are refused naming the option", "[unit][generate]") {
  GenerationConfig c;
  CHECK(refusal(c).empty());
  c.num_beams = 2;
  c.num_return_sequences = 3;
  CHECK_THAT(refusal(c), Catch::Contains("generation.num_return_sequences (3) must be <= generation.num_beams (2)"));
  c.num_beams = 1;
  c.num_return_sequences = 2;
  CHECK_THAT(refusal(c), Catch::Contains("greedy decoding and sampling return one sequence"));
  c.num_return_sequences = 1;
  c.num_beams = 0;
  CHECK_THAT(refusal(c), Catch::Contains("generation.num_beams must be >= 1, got 0"));
  c.num_beams = 3;
  c.do_sample = true;
  CHECK_THAT(refusal(c), Catch::Contains("beam sampling"));
  c.do_sample = false;
  c.min_new_tokens = -1;
  CHECK_THAT(refusal(c), Catch::Contains("generation.min_new_tokens"));
  c.min_new_tokens = 0;
  c.length_penalty = std::numeric_limits<double>::infinity();
  CHECK_THAT(refusal(c), Catch::Contains("generation.length_penalty"));
}

TEST_CASE("the generation section takes the beam search settings and checks them together", "[unit][generate][spec]") {
  CHECK(spec_error("{num_beams: 4, num_return_sequences: 4, length_penalty: 0.6, early_stopping: true, "
                   "no_repeat_ngram_size: 3, min_new_tokens: 2}")
            .empty());
  CHECK(spec_error("{num_beams: 4, early_stopping: never}").empty());
  CHECK_THAT(spec_error("{num_beams: 2, num_return_sequences: 3}"),
             Catch::Contains("generation.num_return_sequences") && Catch::Contains("must be <= generation.num_beams (2)"));
  CHECK_THAT(spec_error("{num_beams: 2, do_sample: true}"), Catch::Contains("generation.num_beams") && Catch::Contains("beam sampling"));
  CHECK_THAT(spec_error("{early_stopping: maybe}"), Catch::Contains("generation.early_stopping") && Catch::Contains("never"));
  CHECK_THAT(spec_error("{num_beams: 0}"), Catch::Contains("generation.num_beams") && Catch::Contains("must be >= 1"));
  CHECK_THAT(spec_error("{num_beam: 2}"), Catch::Contains("did you mean") && Catch::Contains("num_beams"));
  // Bounds hold for optional settings too (null = unset passes): a run is refused before training, not at predict.
  CHECK_THAT(spec_error("{max_new_tokens: -2}"), Catch::Contains("generation.max_new_tokens") && Catch::Contains("must be >= 1, got -2"));
  CHECK_THAT(spec_error("{max_length: 0}"), Catch::Contains("generation.max_length") && Catch::Contains("must be >= 1, got 0"));
  CHECK(spec_error("{max_new_tokens: null, max_length: null}").empty());
}
