// HF model families through the real binary: a gpt2 / llama trained from scratch writes an HF model
// directory (config.json with model_type and architectures, tied weights once), training continues
// from it with model.from_pretrained and no type, a disagreeing type exits 2, and `hftrain predict`
// generation: top_k 1 sampling equals greedy, a seeded sampling run repeats. A pretrained gpt2 / llama /
// bert directory never trained here is evaluated and predicted with directly (model.from_pretrained or
// --model), giving what a zero-learning-rate training run from it gives.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_runner.h"
#include "fixture_text.h"

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

std::vector<json> generated_ids(const std::string& dir, const std::string& args) {
  CliResult p = run_hftrain("predict out " + args, dir);
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  std::vector<json> ids;
  for (const auto& j : read_jsonl(dir + "/out/predictions.jsonl")) ids.push_back(j["generated_ids"]);
  REQUIRE(ids.size() == 4);
  return ids;
}

// A pretrained model directory as it comes from elsewhere: a short training run whose config.json and
// model.safetensors (only) are copied into dir/pretrained.
void make_pretrained(const std::string& dir, const std::string& train_spec) {
  write_text(dir + "/make.yaml", train_spec);
  CliResult r = run_hftrain("train make.yaml --set training.output_dir=made --set training.do_eval=false", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  fs::create_directories(dir + "/pretrained");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(dir + "/made/" + f, dir + "/pretrained/" + f);
}

// `hftrain eval` / `predict` of spec.yaml (model.from_pretrained: pretrained, output_dir `direct` not yet
// created) give the metrics and predictions of a zero-learning-rate training run from the same weights.
void check_pretrained_eval_and_predict(const std::string& dir, const std::string& metric) {
  CliResult e = run_hftrain("eval spec.yaml", dir);
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  CHECK_THAT(e.output, Catch::Contains("model weights: model.from_pretrained pretrained (no trained model in 'direct')"));
  CliResult p = run_hftrain("predict spec.yaml", dir);
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  const json direct = json::parse(read_text(dir + "/direct/eval_results.json"));

  CliResult t = run_hftrain("train spec.yaml --set training.output_dir=lr0 --set training.learning_rate=0 "
                            "--set training.max_steps=2 --set training.save_strategy=no",
                            dir);
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  const json trained = json::parse(read_text(dir + "/lr0/eval_results.json"));
  CHECK(direct.at("eval_loss").get<double>() == Approx(trained.at("eval_loss").get<double>()).epsilon(1e-9));
  CHECK(direct.at(metric) == trained.at(metric));
  CliResult tp = run_hftrain("predict lr0", dir);
  INFO(tp.output);
  REQUIRE(tp.exit_code == 0);
  CHECK_THAT(tp.output, Catch::Contains("model weights: the trained model lr0/model.safetensors"));
  CHECK(read_text(dir + "/direct/predictions.jsonl") == read_text(dir + "/lr0/predictions.jsonl"));
  CHECK_FALSE(read_text(dir + "/direct/predictions.jsonl").empty());
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

TEST_CASE("eval and predict use a pretrained gpt2 directory never trained here", "[integration][hfmodels]") {
  std::string dir = fresh_dir("hf_pretrained_gpt2");
  make_pretrained(dir, spec_for("{type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}", "unused"));
  write_text(dir + "/spec.yaml", spec_for("{from_pretrained: pretrained}", "direct"));
  check_pretrained_eval_and_predict(dir, "eval_exact_match");

  {  // --model names the weights for a spec without a model section
    write_text(dir + "/nomodel.yaml", "data: {type: digit_reversal, num_digits: 3, train_size: 128, eval_size: 16, test_size: 4}\n"
                                      "training: {output_dir: viamodel}\n");
    CliResult e = run_hftrain("eval nomodel.yaml --model pretrained", dir);
    INFO(e.output);
    REQUIRE(e.exit_code == 0);
    CHECK_THAT(e.output, Catch::Contains("model weights: --model pretrained"));
    CHECK(json::parse(read_text(dir + "/viamodel/eval_results.json"))["eval_loss"] ==
          json::parse(read_text(dir + "/direct/eval_results.json"))["eval_loss"]);
    CHECK(run_hftrain("eval nomodel.yaml --model absent", dir).exit_code == 2);
  }
  {  // a spec with neither a pretrained nor a trained model exits 2 and writes nothing
    write_text(dir + "/fresh.yaml", spec_for("{type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}", "never"));
    for (const char* cmd : {"eval fresh.yaml", "predict fresh.yaml"}) {
      CliResult r = run_hftrain(cmd, dir);
      INFO(r.output);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.output, Catch::Contains("no trained model at 'never/model.safetensors' and the spec names no "
                                           "model.from_pretrained"));
    }
    CHECK_FALSE(fs::exists(dir + "/never"));
  }
}

TEST_CASE("eval and predict use a pretrained llama directory never trained here", "[integration][hfmodels]") {
  std::string dir = fresh_dir("hf_pretrained_llama");
  make_pretrained(dir, spec_for("{type: llama, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, "
                                "num_attention_heads: 4, num_key_value_heads: 2}",
                                "unused"));
  write_text(dir + "/spec.yaml", spec_for("{from_pretrained: pretrained}", "direct"));
  check_pretrained_eval_and_predict(dir, "eval_exact_match");
}

TEST_CASE("eval and predict use a pretrained bert classifier directory never trained here", "[integration][hfmodels]") {
  std::string dir = fresh_dir("hf_pretrained_bert");
  write_text(dir + "/train.csv", sentiment_csv(32, 0));
  write_text(dir + "/val.csv", sentiment_csv(12, 1));
  const std::string data = "data: {type: csv, train_file: train.csv, validation_file: val.csv, task: sequence_classification, "
                           "text_column: sentence, max_length: 16, cache_dir: cache}\n";
  make_pretrained(dir, "model: {type: bert, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}\n" +
                           data + "training: {output_dir: unused, per_device_train_batch_size: 8, max_steps: 4, "
                           "learning_rate: 0.003, save_strategy: \"no\", report_to: none}\n");
  write_text(dir + "/spec.yaml", "model: {from_pretrained: pretrained}\n" + data +
                                     "training: {output_dir: direct, per_device_train_batch_size: 8, report_to: none}\n");
  check_pretrained_eval_and_predict(dir, "eval_accuracy");
}

TEST_CASE("a generation setting outside the vocabulary does not block training, predict refuses it, null clears it",
          "[integration][hfmodels]") {
  // What GPT2Config(vocab_size=...) saves: bos / eos 50256 kept from GPT-2 although the vocabulary is small.
  std::string dir = fresh_dir("hf_gpt2_far_eos");
  make_pretrained(dir, spec_for("{type: gpt2, n_layer: 1, n_head: 2, n_embd: 16}", "unused"));
  write_text(dir + "/pretrained/generation_config.json",
             "{\"bos_token_id\": 50256, \"eos_token_id\": 50256, \"transformers_version\": \"4.46.0\"}\n");
  write_text(dir + "/spec.yaml", spec_for("{from_pretrained: pretrained}", "tuned"));
  const CliResult t = run_hftrain("train spec.yaml", dir);
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  CHECK_THAT(t.output, Catch::Contains("generation.eos_token_id: 50256 is outside the model's vocabulary") &&
                           Catch::Contains("generation_config.json") && Catch::Contains("Training goes on"));
  CHECK(fs::exists(dir + "/tuned/model.safetensors"));
  // Generating with it is refused, naming where the id came from and what to set.
  const CliResult p = run_hftrain("predict tuned", dir);
  INFO(p.output);
  CHECK(p.exit_code == 2);
  CHECK_THAT(p.output, Catch::Contains("generation.eos_token_id: 50256 is outside") &&
                           Catch::Contains("set generation.eos_token_id"));
  // null written on the command line is the spec's own choice: the file's 50256 is not filled in.
  const CliResult n = run_hftrain("predict tuned --set generation.eos_token_id=null", dir);
  INFO(n.output);
  CHECK(n.exit_code == 0);
  const CliResult quiet = run_hftrain("train spec.yaml --set training.output_dir=quiet --set generation.eos_token_id=null", dir);
  INFO(quiet.output);
  CHECK(quiet.exit_code == 0);
  CHECK_THAT(quiet.output, !Catch::Contains("outside the model's vocabulary"));
}
