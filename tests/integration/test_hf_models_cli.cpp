// HF model families through the real binary: a gpt2 / llama trained from scratch writes an HF model
// directory (config.json with model_type and architectures, tied weights once), training continues
// from it with model.from_pretrained and no type, a disagreeing type exits 2, and `hftrain predict`
// generation: top_k 1 sampling equals greedy, a seeded sampling run repeats.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_runner.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string spec_for(const std::string& model, const std::string& output_dir) {
  return "model: " + model + "\n" +
         "data: {type: digit_reversal, num_digits: 3, train_size: 128, eval_size: 16, test_size: 4}\n"
         "training: {output_dir: " + output_dir + ", per_device_train_batch_size: 16, max_steps: 6, "
         "learning_rate: 0.003, save_strategy: \"no\"}\n"
         "generation: {max_new_tokens: 3}\n";
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::vector<json> generated_ids(const std::string& dir, const std::string& args) {
  CliResult p = run_hftrain("predict out " + args, dir);
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  std::vector<json> ids;
  for (const auto& j : read_jsonl(dir + "/out/predictions.jsonl")) ids.push_back(j["generated_ids"]);
  REQUIRE(ids.size() == 4);
  return ids;
}

}  // namespace

TEST_CASE("gpt2 trains from scratch into an HF directory, continues from it, and generates", "[integration][hfmodels]") {
  std::string dir = fresh_dir("hf_gpt2");
  write_text(dir + "/spec.yaml", spec_for("{type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}", "out"));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["architectures"] == json::array({"GPT2LMHeadModel"}));
  CHECK(config["n_embd"] == 16);
  CHECK(config["torch_dtype"] == "float32");

  SECTION("from_pretrained without a type continues training; a disagreeing type exits 2") {
    write_text(dir + "/more.yaml", spec_for("{from_pretrained: out, resid_pdrop: 0.0}", "more"));
    CliResult more = run_hftrain("train more.yaml", dir);
    INFO(more.output);
    CHECK(more.exit_code == 0);
    CHECK(json::parse(read_text(dir + "/more/config.json"))["resid_pdrop"] == 0.0);
    write_text(dir + "/bad.yaml", spec_for("{type: llama, from_pretrained: out}", "bad"));
    CliResult bad = run_hftrain("train bad.yaml", dir);
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("llama") != std::string::npos);
    CHECK(bad.output.find("gpt2") != std::string::npos);
    CHECK_FALSE(fs::exists(dir + "/bad"));
  }
  SECTION("predict: top_k 1 sampling equals greedy; seeded sampling repeats") {
    auto greedy = generated_ids(dir, "");
    CHECK(generated_ids(dir, "--set generation.do_sample=true --set generation.top_k=1") == greedy);
    const std::string sampled = "--set generation.do_sample=true --set generation.top_k=0 --set generation.temperature=3 "
                                "--set generation.seed=5";
    CHECK(generated_ids(dir, sampled) == generated_ids(dir, sampled));
  }
}

TEST_CASE("llama trains from scratch into an HF directory", "[integration][hfmodels]") {
  std::string dir = fresh_dir("hf_llama");
  write_text(dir + "/spec.yaml", spec_for("{type: llama, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, "
                                          "num_attention_heads: 4, num_key_value_heads: 2}",
                                          "out"));
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  json config = json::parse(read_text(dir + "/out/config.json"));
  CHECK(config["model_type"] == "llama");
  CHECK(config["num_key_value_heads"] == 2);
  CHECK(fs::exists(dir + "/out/model.safetensors"));
  generated_ids(dir, "");
}
