// Beam search through `hftrain predict`: the generation flags (--num-beams, --num-return-sequences, ...)
// act as the generation.* settings, predictions.jsonl carries every returned sequence with its score,
// best first, --num-beams 1 is the plain greedy prediction, and impossible settings exit 2 before
// predictions.jsonl is written.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

TEST_CASE("predict with beam search flags writes the returned sequences and their scores", "[integration][generate]") {
  const std::string dir = fresh_dir("beam_search_cli");
  write_text(dir + "/spec.yaml",
             "model: {type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}\n"
             "data: {type: digit_reversal, num_digits: 3, train_size: 128, eval_size: 16, test_size: 4}\n"
             "training: {output_dir: out, per_device_train_batch_size: 16, max_steps: 6, learning_rate: 0.003, "
             "save_strategy: \"no\"}\n"
             "generation: {max_new_tokens: 4}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  CliResult greedy = run_hftrain("predict out", dir);
  INFO(greedy.output);
  REQUIRE(greedy.exit_code == 0);
  const auto greedy_lines = read_jsonl(dir + "/out/predictions.jsonl");
  REQUIRE(greedy_lines.size() == 4);
  CHECK_FALSE(greedy_lines[0].contains("sequence_score"));

  CliResult one = run_hftrain("predict out --num-beams 1", dir);
  REQUIRE(one.exit_code == 0);
  CHECK(read_jsonl(dir + "/out/predictions.jsonl") == greedy_lines);

  CliResult beams = run_hftrain("predict out --num-beams 3 --num-return-sequences 3 --length-penalty 0.5 "
                                "--early-stopping never --no-repeat-ngram-size 3 --min-new-tokens 1",
                                dir);
  INFO(beams.output);
  REQUIRE(beams.exit_code == 0);
  const auto lines = read_jsonl(dir + "/out/predictions.jsonl");
  REQUIRE(lines.size() == 4);
  for (const auto& line : lines) {
    INFO(line.dump());
    REQUIRE(line.contains("sequences"));
    const auto& seqs = line["sequences"];
    REQUIRE(seqs.size() == 3);
    CHECK(line["generated_ids"] == seqs[0]["generated_ids"]);
    CHECK(line["sequence_score"] == seqs[0]["sequence_score"]);
    CHECK(seqs[0]["sequence_score"].get<double>() >= seqs[1]["sequence_score"].get<double>());
    CHECK(seqs[1]["sequence_score"].get<double>() >= seqs[2]["sequence_score"].get<double>());
    CHECK(seqs[0]["sequence_score"].get<double>() < 0);
    CHECK(seqs[0]["generated_ids"] != seqs[1]["generated_ids"]);
    for (const auto& s : seqs) CHECK(s["generated_ids"].size() <= 4);
  }
  // The flags are the spec's settings: the same run through --set gives the same file.
  const std::string via_flags = read_text(dir + "/out/predictions.jsonl");
  REQUIRE(run_hftrain("predict out --set generation.num_beams=3 --set generation.num_return_sequences=3 "
                      "--set generation.length_penalty=0.5 --set generation.early_stopping=never "
                      "--set generation.no_repeat_ngram_size=3 --set generation.min_new_tokens=1",
                      dir)
              .exit_code == 0);
  CHECK(read_text(dir + "/out/predictions.jsonl") == via_flags);

  SECTION("impossible settings exit 2 before anything is written") {
    fs::remove(dir + "/out/predictions.jsonl");
    for (const char* args : {"--num-beams 2 --num-return-sequences 3", "--num-beams 0", "--early-stopping maybe",
                             "--num-beams 2 --do-sample true", "--num-return-sequences 2"}) {
      CliResult bad = run_hftrain(std::string("predict out ") + args, dir);
      INFO(args << "\n" << bad.output);
      CHECK(bad.exit_code == 2);
      CHECK_THAT(bad.output, Catch::Contains("generation."));
      CHECK_FALSE(fs::exists(dir + "/out/predictions.jsonl"));
    }
  }
}
