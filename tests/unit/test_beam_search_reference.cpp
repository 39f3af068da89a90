// The hftrain side of tests/reference/beam_search_reference.py (hidden: run by that script, which sets
// HFTRAIN_BEAM_REFERENCE_DIR). For each case of cases.json: load the case's model directory (made by the
// script) through model.from_pretrained, run generate_sequences with the case's settings, and write every
// returned sequence and score to hftrain_results.json; the script compares them with its own beam search.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "generate/generate.h"
#include "train/model_and_data.h"
#include "util/fs.h"

using namespace hftrain;

TEST_CASE("generation settings on HF model directories made outside hftrain (driven by beam_search_reference.py)",
          "[.][beam_ref]") {
  const char* root_env = std::getenv("HFTRAIN_BEAM_REFERENCE_DIR");
  REQUIRE(root_env != nullptr);
  const std::string root = root_env;
  const auto cases = nlohmann::json::parse(read_text_file(root + "/cases.json"));
  REQUIRE(cases.size() > 0);
  const Components& c = builtin_components();
  std::map<std::string, std::shared_ptr<Model>> models;
  auto model_for = [&](const std::string& name) {
    auto& m = models[name];
    if (m) return m;
    const std::string dir = root + "/" + name;
    {
      std::ofstream spec(dir + "/spec.yaml");
      spec << "model: {from_pretrained: '" << dir << "'}\ndata: {type: digit_reversal}\ntraining: {output_dir: '" << dir
           << "/out'}\n";
    }
    RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
    m = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(spec.model.from_pretrained, *m);
    m->eval();
    return m;
  };
  nlohmann::json results = nlohmann::json::object();
  for (const auto& k : cases) {
    INFO(k.dump());
    GenerationConfig config;
    if (k.at("max_length").is_null()) config.max_new_tokens = k.at("max_new_tokens");  // else max_length decides
    config.num_beams = k.at("num_beams");
    config.length_penalty = k.at("length_penalty");
    config.early_stopping = k.at("early_stopping").get<std::string>();
    config.no_repeat_ngram_size = k.at("no_repeat_ngram_size");
    config.num_return_sequences = k.at("num_return_sequences");
    config.min_new_tokens = k.at("min_new_tokens");
    if (!k.at("eos").is_null()) config.eos_token_id = k.at("eos").get<int64_t>();
    config.max_context = k.at("max_context");
    auto optional_int = [&](const char* key) {
      return k.at(key).is_null() ? std::optional<int64_t>() : std::optional<int64_t>(k.at(key).get<int64_t>());
    };
    config.max_length = optional_int("max_length");
    config.min_length = optional_int("min_length");
    config.forced_bos_token_id = optional_int("forced_bos");
    config.forced_eos_token_id = optional_int("forced_eos");
    at::Generator generator = make_generator(0);
    const auto sequences =
        generate_sequences(*model_for(k.at("model").get<std::string>()), k.at("prompt").get<std::vector<int64_t>>(), config, generator);
    REQUIRE(static_cast<int64_t>(sequences.size()) == config.num_return_sequences);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : sequences) out.push_back({{"tokens", s.tokens}, {"score", s.score}});
    results[k.at("name").get<std::string>()] = out;
  }
  std::ofstream(root + "/hftrain_results.json") << results.dump(1);
}
