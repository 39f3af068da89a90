// Run-spec validation: every error names file:line:col and the dotted key, suggests the closest
// name, and all problems are reported at once.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "builtins/components.h"
#include "util/error.h"

using namespace hftrain;

namespace {

std::string write_spec(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "hftrain_unit_spec";
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

const char* kValid = R"(model:
  type: gpt
  n_layer: 1
data:
  type: digit_reversal
training:
  output_dir: /tmp/x
  learning_rate: 0.001
)";

std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_run_spec(path, overrides, builtin_components().catalog());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a valid spec loads with HF defaults filled in", "[unit][spec]") {
  RunSpec spec = load_run_spec(write_spec("valid.yaml", kValid), {}, builtin_components().catalog());
  CHECK(spec.model.type == "gpt");
  CHECK(spec.optimizer.type == "adamw");
  CHECK(spec.scheduler.type == "linear");
  CHECK(spec.training.learning_rate == Approx(0.001));
  CHECK(spec.training.per_device_train_batch_size == 8);
  CHECK(spec.training.num_train_epochs == 3.0);
  CHECK(spec.training.adam_beta2 == 0.999);
  CHECK(spec.training.save_strategy == "steps");
}

TEST_CASE("unknown key names file:line:col, dotted path and the closest valid name", "[unit][spec]") {
  std::string path = write_spec("typo.yaml", std::string(kValid) + "  learnig_rate: 0.1\n");
  std::string err = load_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":9:3: training.learnig_rate: unknown key (did you mean 'learning_rate'?)"));
}

TEST_CASE("YAML syntax errors show line and column", "[unit][spec]") {
  std::string path = write_spec("syntax.yaml", "model:\n  type: gpt\n  n_layer: [1, 2\ndata: x\n");
  std::string err = load_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":"));
  CHECK_THAT(err, Catch::Contains("syntax error"));
}

TEST_CASE("missing spec file is a config error naming the file", "[unit][spec]") {
  CHECK_THAT(load_error("/nonexistent/spec.yaml"), Catch::Contains("cannot read run spec '/nonexistent/spec.yaml'"));
}

TEST_CASE("unknown component type lists the valid ones", "[unit][spec]") {
  std::string err = load_error(write_spec("comp.yaml", "model: {type: gtp}\ndata: {type: digit_reversal}\ntraining: {output_dir: x}\n"));
  CHECK_THAT(err, Catch::Contains("model.type: unknown model type 'gtp' (did you mean 'gpt'?); valid types: bert, bert_mlm, gpt, gpt2, llama, mlp"));
}

TEST_CASE("an option of another component is named as such", "[unit][spec]") {
  std::string err = load_error(
      write_spec("other.yaml", "model: {type: mlp, n_layer: 2}\ndata: {type: gaussian_blobs}\ntraining: {output_dir: x}\n"));
  CHECK_THAT(err, Catch::Contains("model.n_layer: unknown key for model type 'mlp': it is an option of type 'gpt'"));
}

TEST_CASE("wrong types, ranges and missing values are all reported at once", "[unit][spec]") {
  std::string err = load_error(write_spec("many.yaml", R"(model: {type: gpt, n_layer: two}
data: {type: text_file}
training:
  per_device_train_batch_size: -4
  eval_strategy: sometimes
)"));
  CHECK_THAT(err, Catch::Contains("5 problems"));
  CHECK_THAT(err, Catch::Contains("model.n_layer: expected integer, got 'two'"));
  CHECK_THAT(err, Catch::Contains("data.path: required value is missing"));
  CHECK_THAT(err, Catch::Contains("training.per_device_train_batch_size: must be >= 1, got -4"));
  CHECK_THAT(err, Catch::Contains("training.eval_strategy: 'sometimes' is not one of: no, steps, epoch"));
  CHECK_THAT(err, Catch::Contains("training.output_dir: required value is missing"));
}

TEST_CASE("command-line overrides are typed and validated like the file", "[unit][spec]") {
  std::string path = write_spec("valid2.yaml", kValid);
  RunSpec spec = load_run_spec(path, {"training.learning_rate=3e-4", "model.n_head=2"}, builtin_components().catalog());
  CHECK(spec.training.learning_rate == Approx(3e-4));
  CHECK_THAT(load_error(path, {"training.per_device_train_batch_size=abc"}),
             Catch::Contains("--set training.per_device_train_batch_size: training.per_device_train_batch_size: expected integer, got 'abc'"));
  CHECK_THAT(load_error(path, {"training.warmup_stepz=3"}), Catch::Contains("did you mean 'warmup_steps'?"));
  CHECK_THROWS_AS(load_run_spec(path, {"no_equals_sign"}, builtin_components().catalog()), ConfigError);
}

TEST_CASE("capabilities not built yet refuse instead of being ignored", "[unit][spec]") {
  std::string path = write_spec("zero.yaml", kValid);
  CHECK_THAT(load_error(path, {"zero.stage=3"}), Catch::Contains("zero.stage: ZeRO stage 3 (parameter partitioning) is not available"));
  CHECK_THAT(load_error(path, {"zero.offload_optimizer=cpu"}), Catch::Contains("offload is not available"));
  CHECK_THAT(load_error(path, {"distributed.backend=nccl"}), Catch::Contains("nccl needs CUDA"));
  // Built: data parallelism and ZeRO stages 1-2.
  RunSpec spec = load_run_spec(path, {"zero.stage=2", "distributed.nproc_per_node=2"}, builtin_components().catalog());
  CHECK(spec.zero.stage == 2);
  CHECK(spec.distributed.nproc_per_node == 2);
}

TEST_CASE("a dumped spec reloads to the same dump (defaults included)", "[unit][spec]") {
  const auto& c = builtin_components();
  RunSpec spec = load_run_spec(write_spec("valid3.yaml", kValid), {}, c.catalog());
  std::string dumped = dump_run_spec(spec, c.catalog());
  CHECK_THAT(dumped, Catch::Contains("per_device_eval_batch_size: 8"));
  CHECK_THAT(dumped, Catch::Contains("n_embd: 128"));
  RunSpec again = load_run_spec(write_spec("dumped.yaml", dumped), {}, c.catalog());
  CHECK(dump_run_spec(again, c.catalog()) == dumped);
}

TEST_CASE("JSON specs are accepted", "[unit][spec]") {
  RunSpec spec = load_run_spec(
      write_spec("spec.json", R"({"model": {"type": "mlp"}, "data": {"type": "gaussian_blobs"}, "training": {"output_dir": "o", "max_steps": 5}})"),
      {}, builtin_components().catalog());
  CHECK(spec.training.max_steps == 5);
}
