// Where generation settings come from (spec/generation_sources): the spec's generation section first, then
// Seq2SeqTrainingArguments' generation_max_length / generation_num_beams, then an HF generation_config.json
// (training.generation_config, or the model directory's), then the defaults; settings hftrain cannot honour
// are errors naming the file and key, HF's neutral values and the model facts the file repeats are not.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "builtins/register_builtins.h"
#include "train/model_and_data.h"
#include "util/error.h"
#include "scratch_files.h"

using hftrain_test::write;

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

std::string scratch_dir() {
  auto dir = fs::temp_directory_path() / ("hftrain_generation_sources_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// bart-large-cnn's generation_config.json (public facts: its summarisation settings and token ids).
const char* kCnnGenerationConfig = R"({"_from_model_config": true, "bos_token_id": 0, "decoder_start_token_id": 2,
  "early_stopping": true, "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
  "length_penalty": 2.0, "max_length": 142, "min_length": 56, "no_repeat_ngram_size": 3, "num_beams": 4,
  "pad_token_id": 1, "transformers_version": "4.27.0.dev0"})";

std::string spec_text(const std::string& training_extra, const std::string& generation = "") {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\ndata: {type: digit_reversal}\n"
         "training: {output_dir: out" + training_extra + "}\n" + (generation.empty() ? "" : "generation: " + generation + "\n");
}

std::string generation_spec_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_run_spec(path, overrides, builtin_components().catalog());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

}  // namespace

TEST_CASE("generation settings: the spec, then generation_max_length / num_beams, then generation_config.json", "[unit][spec][seq2seq]") {
  const std::string dir = scratch_dir();
  write(dir + "/generation_config.json", kCnnGenerationConfig);
  const auto& catalog = builtin_components().catalog();

  // The file alone fills every setting it has (early_stopping true -> "true").
  write(dir + "/a.yaml", spec_text(", generation_config: " + dir));
  RunSpec a = load_run_spec(dir + "/a.yaml", {}, catalog);
  CHECK(a.generation.num_beams == 4);
  CHECK(a.generation.max_length == 142);
  CHECK(a.generation.min_length == 56);
  CHECK(a.generation.no_repeat_ngram_size == 3);
  CHECK(a.generation.length_penalty == 2.0);
  CHECK(a.generation.early_stopping == "true");
  CHECK(a.generation.forced_bos_token_id == 0);
  CHECK(a.generation.forced_eos_token_id == 2);
  CHECK(a.generation.eos_token_id == 2);
  CHECK_FALSE(a.generation.max_new_tokens.has_value());
  CHECK(a.origins.at("generation.num_beams") == dir + "/generation_config.json (num_beams)");

  // Seq2SeqTrainingArguments win over the file; the spec's own section (and --set, and the eval / predict
  // flags, which are --set) wins over both.
  write(dir + "/b.yaml", spec_text(", generation_config: " + dir + "/generation_config.json, generation_max_length: 20, "
                                   "generation_num_beams: 2", "{num_beams: 3}"));
  RunSpec b = load_run_spec(dir + "/b.yaml", {"generation.min_length=5"}, catalog);
  CHECK(b.generation.num_beams == 3);
  CHECK(b.generation.max_length == 20);
  CHECK(b.generation.min_length == 5);
  CHECK(b.generation.no_repeat_ngram_size == 3);
  CHECK(b.origins.at("generation.max_length") == "training.generation_max_length");

  // Without training.generation_config, the model directory's generation_config.json counts (as HF's
  // from_pretrained loads it); without either, the built-in defaults.
  fs::create_directories(dir + "/model");
  write(dir + "/model/generation_config.json", R"({"num_beams": 5, "pad_token_id": 0, "repetition_penalty": 1.0})");
  write(dir + "/model/model.safetensors", "");
  write(dir + "/c.yaml", "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16, from_pretrained: " + dir +
                             "/model}\ndata: {type: digit_reversal}\ntraining: {output_dir: out}\n");
  CHECK(load_run_spec(dir + "/c.yaml", {}, catalog).generation.num_beams == 5);
  // Without any generation_config.json, config.json's generation settings count (HF's
  // GenerationConfig.from_model_config), but not its token ids: eos stays the tokenizer's.
  fs::create_directories(dir + "/hf");
  write(dir + "/hf/config.json", R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 32,
    "n_positions": 64, "num_beams": 3, "forced_eos_token_id": 5, "eos_token_id": 7, "max_length": 20})");
  write(dir + "/e.yaml", "model: {from_pretrained: " + dir + "/hf}\ndata: {type: digit_reversal}\ntraining: {output_dir: out}\n"
                             "generation: {max_length: 9}\n");
  RunSpec e = load_run_spec(dir + "/e.yaml", {}, catalog);
  CHECK(e.generation.num_beams == 3);
  CHECK(e.generation.forced_eos_token_id == 5);
  CHECK(e.generation.max_length == 9);  // the spec's own key wins
  CHECK_FALSE(e.generation.eos_token_id.has_value());
  CHECK(e.origins.at("generation.num_beams") == dir + "/hf/config.json (num_beams)");
  write(dir + "/hf/generation_config.json", R"({"num_beams": 2})");  // a generation_config.json replaces them all
  RunSpec f = load_run_spec(dir + "/e.yaml", {}, catalog);
  CHECK(f.generation.num_beams == 2);
  CHECK_FALSE(f.generation.forced_eos_token_id.has_value());
  write(dir + "/d.yaml", spec_text(""));
  RunSpec d = load_run_spec(dir + "/d.yaml", {}, catalog);
  CHECK(d.generation.num_beams == 1);
  CHECK_FALSE(d.generation.max_length.has_value());
  fs::remove_all(dir);
}

TEST_CASE("generation_config.json settings hftrain cannot honour are kept to refuse generating, not loading", "[unit][spec][seq2seq]") {
  const std::string dir = scratch_dir();
  const auto& catalog = builtin_components().catalog();
  write(dir + "/g.json", R"({"repetition_penalty": 1.2, "num_beam_groups": 1, "eos_token_id": [1, 2], "num_beams": 4,
    "decoder_start_token_id": 5})");
  write(dir + "/s.yaml", spec_text(", generation_config: " + dir + "/g.json"));
  // Loading succeeds (training never generates); the problems are recorded, named by file and key, and noted.
  RunSpec s = load_run_spec(dir + "/s.yaml", {}, catalog);
  REQUIRE(s.generation_sources.unsupported.size() == 2);
  CHECK_THAT(s.generation_sources.unsupported[0], Catch::Contains(dir + "/g.json: eos_token_id: several eos tokens [1,2]"));
  CHECK_THAT(s.generation_sources.unsupported[1], Catch::Contains(dir + "/g.json: repetition_penalty: 1.2") &&
                                                      Catch::Contains("does not build"));
  CHECK(s.generation.num_beams == 4);  // the supported settings still count; num_beam_groups 1 is HF's neutral value
  CHECK(s.generation_sources.decoder_start_token_id == 5);
  bool noted = false;
  for (const auto& n : s.notes) noted = noted || n.find("repetition_penalty") != std::string::npos;
  CHECK(noted);
  // A key the spec sets itself is not taken from the file, so its problem goes away.
  RunSpec own = load_run_spec(dir + "/s.yaml", {"generation.eos_token_id=1"}, catalog);
  REQUIRE(own.generation_sources.unsupported.size() == 1);
  CHECK_THAT(own.generation_sources.unsupported[0], Catch::Contains("repetition_penalty"));
  CHECK(own.generation.eos_token_id == 1);
  // null written by the spec (or --set) is its own choice too: the file's eos list is neither taken nor a problem.
  RunSpec cleared = load_run_spec(dir + "/s.yaml", {"generation.eos_token_id=null"}, catalog);
  CHECK_FALSE(cleared.generation.eos_token_id.has_value());
  CHECK(cleared.generation_sources.cleared_keys == std::vector<std::string>{"eos_token_id"});
  REQUIRE(cleared.generation_sources.unsupported.size() == 1);
  CHECK_THAT(cleared.generation_sources.unsupported[0], Catch::Contains("repetition_penalty"));
  // A one-element eos list is one eos token.
  write(dir + "/g.json", R"({"eos_token_id": [7]})");
  CHECK(load_run_spec(dir + "/s.yaml", {}, catalog).generation.eos_token_id == 7);
  // A value the generation section would refuse is reported where the file wrote it.
  write(dir + "/g.json", R"({"num_beams": 0})");
  CHECK_THAT(generation_spec_error(dir + "/s.yaml"), Catch::Contains("g.json (num_beams)") && Catch::Contains("generation.num_beams"));
  write(dir + "/g.json", "{not json");
  CHECK_THAT(generation_spec_error(dir + "/s.yaml"), Catch::Contains("g.json: not valid JSON"));
  write(dir + "/m.yaml", spec_text(", generation_config: " + dir + "/missing"));
  CHECK_THAT(generation_spec_error(dir + "/m.yaml"), Catch::Contains("training.generation_config") && Catch::Contains("does not exist"));
  // sortish_sampler and group_by_length both reorder by length.
  write(dir + "/o.yaml", spec_text(", sortish_sampler: true, group_by_length: true"));
  CHECK_THAT(generation_spec_error(dir + "/o.yaml"), Catch::Contains("training.sortish_sampler") && Catch::Contains("choose one"));
  fs::remove_all(dir);
}

TEST_CASE("the saved run spec keeps the generation keys the spec set, so a reload resolves the others again", "[unit][spec][seq2seq]") {
  const std::string dir = scratch_dir();
  const auto& catalog = builtin_components().catalog();
  write(dir + "/s.yaml", spec_text(", generation_max_length: 12", "{num_beams: 3, max_new_tokens: null}"));
  RunSpec s = load_run_spec(dir + "/s.yaml", {}, catalog);
  CHECK(s.generation.max_length == 12);
  CHECK(s.generation_sources.given_keys == std::vector<std::string>{"num_beams"});  // null is no value of the spec's
  CHECK(s.generation_sources.cleared_keys == std::vector<std::string>{"max_new_tokens"});  // but no source fills it
  write(dir + "/saved.yaml", dump_run_spec(s, catalog));
  RunSpec again = load_run_spec(dir + "/saved.yaml", {"training.generation_max_length=5"}, catalog);
  CHECK(again.generation.num_beams == 3);
  CHECK(again.generation.max_length == 5);  // filled again from the (overridden) training setting
  CHECK(again.generation_sources.cleared_keys == std::vector<std::string>{"max_new_tokens"});  // saved as null
  // --dump-config (with origins) lists the resolved values of the keys the spec did not set, as comments.
  CHECK_THAT(dump_run_spec(s, catalog, true), Catch::Contains("#   max_length: 12  (training.generation_max_length)"));
  CHECK_THAT(dump_run_spec(s, catalog, true), Catch::Contains("#   min_length: ~\n"));
  fs::remove_all(dir);
}

TEST_CASE("the model's own forced tokens fill generation where the spec and its sources leave them unset", "[unit][spec][seq2seq]") {
  // HF GenerationConfig.from_model_config: a bart built here (no model directory) forces its eos at the limit.
  const std::string dir = scratch_dir();
  const auto& c = builtin_components();
  const std::string model = "model: {type: bart, d_model: 16, encoder_layers: 1, decoder_layers: 1, encoder_attention_heads: 2, "
                            "decoder_attention_heads: 2, encoder_ffn_dim: 16, decoder_ffn_dim: 16, pad_token_id: 0, "
                            "eos_token_id: 1, decoder_start_token_id: 1, forced_eos_token_id: 1}\n";
  const std::string data = "data: {type: digit_reversal_seq2seq, num_digits: 3, train_size: 8, eval_size: 2}\n";
  write(dir + "/a.yaml", model + data + "training: {output_dir: out}\n");
  ModelAndData a = build_model_and_data(load_run_spec(dir + "/a.yaml", {}, c.catalog()), c);
  CHECK(a.generation.forced_eos_token_id == 1);
  CHECK_FALSE(a.generation.forced_bos_token_id.has_value());  // bart names none
  write(dir + "/b.yaml", model + data + "training: {output_dir: out}\ngeneration: {forced_eos_token_id: 3}\n");
  CHECK(build_model_and_data(load_run_spec(dir + "/b.yaml", {}, c.catalog()), c).generation.forced_eos_token_id == 3);
  fs::remove_all(dir);
}
