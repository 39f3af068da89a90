// Run-spec validation: every error names file:line:col and the dotted key, suggests the closest
// name, and all problems are reported at once; duplicate keys at every level; HF TrainingArguments
// names for the optimizer and schedule; checks added by a command; where each value came from.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "builtins/register_builtins.h"
#include "optim/adafactor.h"
#include "optim/hf_schedules.h"
#include "optim/sgd.h"
#include "runspec/spec_rules.h"
#include "util/error.h"
#include "scratch_files.h"

using hftrain_test::write_spec;

using namespace hftrain;

namespace {

const char* kValid = R"(model:
  type: gpt
  n_layer: 1
data:
  type: digit_reversal
training:
  output_dir: /tmp/x
  learning_rate: 0.001
)";

std::string run_spec_error(const std::string& path, const std::vector<std::string>& overrides = {},
                       const std::vector<SpecCheck>& checks = {}) {
  try {
    load_run_spec(path, overrides, builtin_components().catalog(), checks);
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
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":9:3: training.learnig_rate: unknown key (did you mean 'learning_rate'?)"));
}

TEST_CASE("YAML syntax errors show line and column", "[unit][spec]") {
  std::string path = write_spec("syntax.yaml", "model:\n  type: gpt\n  n_layer: [1, 2\ndata: x\n");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":"));
  CHECK_THAT(err, Catch::Contains("syntax error"));
}

TEST_CASE("missing spec file is a config error naming the file", "[unit][spec]") {
  CHECK_THAT(run_spec_error("/nonexistent/spec.yaml"), Catch::Contains("cannot read run spec '/nonexistent/spec.yaml'"));
}

TEST_CASE("unknown component type lists the valid ones", "[unit][spec]") {
  std::string err = run_spec_error(write_spec("comp.yaml", "model: {type: gtp}\ndata: {type: digit_reversal}\ntraining: {output_dir: x}\n"));
  CHECK_THAT(err, Catch::Contains("model.type: unknown model type 'gtp' (did you mean 'gpt'?); valid types: bart, bert, bert_mlm, gemma, gemma2, gemma3_text, gpt, gpt2, llama, mistral, mixtral, mlp, phi3, qwen2, qwen2_moe, qwen3, qwen3_moe, t5"));
}

TEST_CASE("an option of another component is named as such", "[unit][spec]") {
  std::string err = run_spec_error(
      write_spec("other.yaml", "model: {type: mlp, n_layer: 2}\ndata: {type: gaussian_blobs}\ntraining: {output_dir: x}\n"));
  CHECK_THAT(err, Catch::Contains("model.n_layer: unknown key for model type 'mlp': it is an option of type 'gpt'"));
}

TEST_CASE("wrong types, ranges and missing values are all reported at once", "[unit][spec]") {
  std::string err = run_spec_error(write_spec("many.yaml", R"(model: {type: gpt, n_layer: two}
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
  CHECK_THAT(run_spec_error(path, {"training.per_device_train_batch_size=abc"}),
             Catch::Contains("--set training.per_device_train_batch_size: training.per_device_train_batch_size: expected integer, got 'abc'"));
  CHECK_THAT(run_spec_error(path, {"training.warmup_stepz=3"}), Catch::Contains("did you mean 'warmup_steps'?"));
  CHECK_THROWS_AS(load_run_spec(path, {"no_equals_sign"}, builtin_components().catalog()), ConfigError);
}

TEST_CASE("capabilities not built yet refuse instead of being ignored", "[unit][spec]") {
  std::string path = write_spec("zero.yaml", kValid);
  CHECK_THAT(run_spec_error(path, {"zero.stage3_max_live_parameters=0"}), Catch::Contains("zero.stage3_max_live_parameters"));
  // Offload to cpu: DeepSpeed's stage rules, then accepted with a note (this build already runs on the CPU).
  CHECK_THAT(run_spec_error(path, {"zero.offload_optimizer=cpu"}), Catch::Contains("needs zero.stage 1, 2 or 3"));
  CHECK_THAT(run_spec_error(path, {"zero.stage=2", "zero.offload_param=cpu"}), Catch::Contains("needs zero.stage 3"));
  RunSpec offloaded = load_run_spec(path, {"zero.stage=3", "zero.offload_optimizer=cpu", "zero.offload_param=cpu"},
                                    builtin_components().catalog());
  REQUIRE(offloaded.notes.size() == 2);
  CHECK_THAT(offloaded.notes[0], Catch::Contains("zero.offload_optimizer cpu") && Catch::Contains("nothing is moved"));
  CHECK_THAT(run_spec_error(path, {"zero.stage=3", "zero.offload_param=nvme"}), Catch::Contains("zero.offload_param"));
  CHECK_THAT(run_spec_error(path, {"distributed.backend=nccl"}), Catch::Contains("nccl needs CUDA"));
  // Built: data parallelism and ZeRO stages 1-2.
  RunSpec spec = load_run_spec(path, {"zero.stage=2", "distributed.nproc_per_node=2"}, builtin_components().catalog());
  CHECK(spec.zero.stage == 2);
  CHECK(spec.distributed.nproc_per_node.count == 2);
  CHECK_FALSE(spec.distributed.nproc_per_node.automatic);
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

// ---- duplicate keys --------------------------------------------------------------------------------

TEST_CASE("a duplicate key inside a section names the key and both positions", "[unit][spec]") {
  std::string path = write_spec("dup_key.yaml", std::string(kValid) + "  seed: 42\n  max_steps: 3\n  seed: 3\n");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":11:3: training.seed: duplicate key: given at " + path + ":9:3 and again at " +
                                  path + ":11:3"));
  CHECK_THAT(err, Catch::Contains("1 problem"));
}

TEST_CASE("a duplicate section is a duplicate key at the top level", "[unit][spec]") {
  std::string path = write_spec("dup_section.yaml", std::string(kValid) + "training:\n  seed: 3\n");
  CHECK_THAT(run_spec_error(path), Catch::Contains(path + ":9:1: training: duplicate key: given at " + path + ":6:1"));
}

TEST_CASE("duplicate component options and list entries are reported at their depth", "[unit][spec]") {
  std::string path = write_spec("dup_deep.yaml", R"(model: {type: gpt, n_layer: 1, n_layer: 2}
data: {type: digit_reversal}
training: {output_dir: x, metric_for_best_model: loss}
callbacks:
  - {type: early_stopping, early_stopping_patience: 1, early_stopping_patience: 2}
)");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":1:32: model.n_layer: duplicate key: given at " + path + ":1:20"));
  CHECK_THAT(err, Catch::Contains(path + ":5:56: callbacks[0].early_stopping_patience: duplicate key: given at " + path +
                                  ":5:28"));
  CHECK_THAT(err, Catch::Contains("2 problems"));
}

TEST_CASE("duplicate keys are reported together with the other problems", "[unit][spec]") {
  std::string path = write_spec("dup_and_more.yaml", std::string(kValid) + "  learning_rate: 0.1\n  warmup_stepz: 3\n");
  std::string err = run_spec_error(path, {"training.per_device_train_batch_size=0"});
  CHECK_THAT(err, Catch::Contains("3 problems"));
  CHECK_THAT(err, Catch::Contains(path + ":9:3: training.learning_rate: duplicate key: given at " + path + ":8:3"));
  CHECK_THAT(err, Catch::Contains("training.warmup_stepz: unknown key"));
  CHECK_THAT(err, Catch::Contains("--set training.per_device_train_batch_size: training.per_device_train_batch_size: must be >= 1"));
}

TEST_CASE("duplicate keys in JSON specs and in --set values are refused", "[unit][spec]") {
  std::string path = write_spec("dup.json", R"({"model": {"type": "mlp"}, "data": {"type": "gaussian_blobs"},
 "training": {"output_dir": "o", "seed": 1, "seed": 2}})");
  CHECK_THAT(run_spec_error(path), Catch::Contains(path + ":2:45: training.seed: duplicate key: given at " + path + ":2:34"));
  CHECK_THAT(run_spec_error(write_spec("dup_set.yaml", kValid), {"model={type: gpt, type: mlp}"}),
             Catch::Contains("--set model: model.type: duplicate key"));
}

// ---- HF TrainingArguments names for the optimizer and the schedule ---------------------------------

TEST_CASE("training.optim maps HF optimizer names onto optimizer.type", "[unit][spec]") {
  const auto& c = builtin_components();
  const std::string path = write_spec("hf_optim.yaml", kValid);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"adamw_torch", "adamw"}, {"adamw_torch_fused", "adamw"}, {"adamw_hf", "adamw"},
      {"adafactor", "adafactor"}, {"sgd", "sgd"},                 {"lion_32bit", "lion"},
      {"adagrad", "adagrad"}, {"adamw_8bit", "adamw_8bit"}, {"adamw_bnb_8bit", "adamw_8bit"},
      {"galore_adamw", "galore_adamw"}, {"galore_adamw_8bit", "galore_adamw_8bit"},
      {"galore_adafactor", "galore_adafactor"}, {"galore_adamw_layerwise", "galore_adamw_layerwise"},
      {"galore_adamw_8bit_layerwise", "galore_adamw_8bit_layerwise"},
      {"galore_adafactor_layerwise", "galore_adafactor_layerwise"}, {"lomo", "lomo"}, {"adalomo", "adalomo"}};
  for (const auto& [hf, type] : cases) {
    INFO(hf);
    CHECK(load_run_spec(path, {"training.optim=" + hf}, c.catalog()).optimizer.type == type);
  }
  std::string err = run_spec_error(path, {"training.optim=adamw_anyprecision"});
  CHECK_THAT(err, Catch::Contains("training.optim: 'adamw_anyprecision' is not an HF optimizer hftrain runs"));
  CHECK_THAT(err, Catch::Contains("it runs: adamw_torch, adamw_torch_fused, adamw_hf, adamw_apex_fused, adafactor, sgd, lion_32bit, "
                                  "adagrad, adamw_8bit, adamw_bnb_8bit, galore_adamw, galore_adamw_8bit, galore_adafactor, "
                                  "galore_adamw_layerwise, galore_adamw_8bit_layerwise, galore_adafactor_layerwise, lomo, adalomo"));
}

TEST_CASE("HF fsdp / fsdp_config map onto the ZeRO stage and its settings", "[unit][spec]") {
  const auto& c = builtin_components();
  const std::string path = write_spec("hf_fsdp.yaml", kValid);
  CHECK(load_run_spec(path, {"training.fsdp=full_shard auto_wrap"}, c.catalog()).zero.stage == 3);
  CHECK(load_run_spec(path, {"training.fsdp=shard_grad_op"}, c.catalog()).zero.stage == 2);
  CHECK(load_run_spec(path, {"training.fsdp=no_shard"}, c.catalog()).zero.stage == 0);
  const RunSpec spec = load_run_spec(
      path, {"training.fsdp=full_shard", "training.fsdp_config={activation_checkpointing: true, backward_prefetch: NO_PREFETCH, "
             "transformer_layer_cls_to_wrap: [GPT2Block], fsdp_min_num_params: 0}"},
      c.catalog());
  CHECK(spec.zero.stage == 3);
  CHECK(spec.training.gradient_checkpointing);
  CHECK(spec.zero.stage3_prefetch_bucket_size == 0);

  CHECK_THAT(run_spec_error(path, {"training.fsdp=full_shard", "zero.stage=2"}),
             Catch::Contains("training.fsdp: 'full_shard' and zero.stage") && Catch::Contains("give only one"));
  CHECK_THAT(run_spec_error(path, {"training.fsdp=full_shrad"}),
             Catch::Contains("'full_shrad' is not an FSDP option (did you mean 'full_shard'?)"));
  CHECK_THAT(run_spec_error(path, {"training.fsdp=hybrid_shard"}), Catch::Contains("'hybrid_shard'") && Catch::Contains("no equivalent"));
  CHECK_THAT(run_spec_error(path, {"training.fsdp=full_shard", "training.fsdp_config={xla: true}"}),
             Catch::Contains("training.fsdp_config.xla: 'xla: true': XLA (TPU) FSDP is not available"));
  CHECK_FALSE(load_run_spec(path, {"training.fsdp=full_shard", "training.fsdp_config={cpu_ram_efficient_loading: false}"},
                            c.catalog())
                  .zero.zero3_init_flag);
  CHECK(load_run_spec(path, {"training.fsdp=full_shard", "training.fsdp_config={cpu_ram_efficient_loading: true}"}, c.catalog())
            .zero.zero3_init_flag);
  // offload is mapped (never dropped): accepted at stage 3 with a note.
  RunSpec offload = load_run_spec(path, {"training.fsdp=full_shard offload"}, builtin_components().catalog());
  CHECK(offload.zero.offload_param == "cpu");
  REQUIRE(offload.notes.size() == 1);
  CHECK_THAT(offload.notes[0], Catch::Contains("zero.offload_param cpu"));
}

TEST_CASE("training.optim_args and lr_scheduler_kwargs become the sections' validated options", "[unit][spec]") {
  const auto& c = builtin_components();
  RunSpec spec = load_run_spec(write_spec("hf_args.yaml", std::string(kValid) + R"(  optim: sgd
  optim_args: "momentum=0.9, nesterov=True"
  lr_scheduler_type: cosine
  lr_scheduler_kwargs: {num_cycles: 1.5}
)"), {}, c.catalog());
  REQUIRE(spec.optimizer.type == "sgd");
  const auto& sgd = *static_cast<const Sgd::Options*>(spec.optimizer.options.get());
  CHECK(sgd.momentum == 0.9);
  CHECK(sgd.nesterov);
  REQUIRE(spec.scheduler.type == "cosine");
  CHECK(static_cast<const CosineSchedule::Options*>(spec.scheduler.options.get())->num_cycles == 1.5);

  // HF's command-line forms: lr_scheduler_kwargs as JSON text, None for a null optim_args value.
  RunSpec cli = load_run_spec(write_spec("hf_args2.yaml", kValid),
                              {"training.optim=adafactor", "training.optim_args=beta1=None,clip_threshold=2",
                               "training.lr_scheduler_type=cosine", "training.lr_scheduler_kwargs='{\"num_cycles\": 2}'"},
                              c.catalog());
  const auto& ada = *static_cast<const Adafactor::Options*>(cli.optimizer.options.get());
  CHECK_FALSE(ada.beta1.has_value());
  CHECK(ada.clip_threshold == 2.0);
  CHECK(static_cast<const CosineSchedule::Options*>(cli.scheduler.options.get())->num_cycles == 2.0);
}

TEST_CASE("an HF name and its section spelling must agree", "[unit][spec]") {
  std::string path = write_spec("hf_conflict.yaml", R"(model: {type: gpt}
data: {type: digit_reversal}
optimizer: {type: sgd}
scheduler: {type: cosine, num_cycles: 1}
training:
  output_dir: x
  optim: adamw_torch
  lr_scheduler_type: cosine
  lr_scheduler_kwargs: {num_cycles: 2}
)");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains("2 problems"));
  CHECK_THAT(err, Catch::Contains(path + ":7:10: training.optim: 'adamw_torch' disagrees with optimizer.type: 'sgd' at " +
                                  path + ":3:19"));
  CHECK_THAT(err, Catch::Contains(path + ":9:37: training.lr_scheduler_kwargs: 'num_cycles: 2' disagrees with "
                                  "scheduler.num_cycles: '1' at " + path + ":4:39"));
  // The same value written both ways is one setting.
  RunSpec same = load_run_spec(path, {"optimizer.type=adamw", "scheduler.num_cycles=2.0"}, builtin_components().catalog());
  CHECK(same.optimizer.type == "adamw");
}

TEST_CASE("an option moved from an HF name is validated and located at the HF spelling", "[unit][spec]") {
  std::string path = write_spec("hf_bad_args.yaml", std::string(kValid) + "  optim: sgd\n  optim_args: momentum=-1,foo=2,bare\n");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":10:15 (as training.optim_args): optimizer.momentum: must be >= 0, got -1"));
  CHECK_THAT(err, Catch::Contains(path + ":10:15 (as training.optim_args): optimizer.foo: unknown key"));
  CHECK_THAT(err, Catch::Contains(path + ":10:15: training.optim_args: 'bare' is not key=value"));
}

TEST_CASE("the dump for --dump-config says where each written value came from", "[unit][spec]") {
  const auto& c = builtin_components();
  std::string path = write_spec("origins.yaml", std::string(kValid) + "  optim: adafactor\n  lr_scheduler_type: cosine\n");
  RunSpec spec = load_run_spec(path, {"training.seed=7"}, c.catalog());
  const std::string dump = dump_run_spec(spec, c.catalog(), true);
  CHECK_THAT(dump, Catch::Contains("type: adafactor  # training.optim: adafactor (" + path + ":9:10)"));
  CHECK_THAT(dump, Catch::Contains("type: cosine  # training.lr_scheduler_type: cosine (" + path + ":10:22)"));
  CHECK_THAT(dump, Catch::Contains("learning_rate: 0.001  # " + path + ":8:3"));
  CHECK_THAT(dump, Catch::Contains("seed: 7  # --set training.seed"));
  CHECK_THAT(dump, Catch::Contains("n_embd: 128\n"));  // a default: no comment
  CHECK(spec.origins.at("optimizer.type") == "training.optim: adafactor (" + path + ":9:10)");
  // The annotated dump is still a spec that loads to the same values.
  RunSpec again = load_run_spec(write_spec("origins_dump.yaml", dump), {}, c.catalog());
  CHECK(dump_run_spec(again, c.catalog()) == dump_run_spec(spec, c.catalog()));
}

TEST_CASE("a command's spec checks are reported with the other problems at the key", "[unit][spec]") {
  std::string path = write_spec("checks.yaml", std::string(kValid) + "  resume_from_checkpoint: somewhere\n");
  std::vector<SpecCheck> checks = {[](const RunSpec& spec, const SpecProblemReport& report) {
    report("training.resume_from_checkpoint", "'" + spec.training.resume_from_checkpoint + "' is not usable");
  }};
  std::string err = run_spec_error(path, {"training.seed=-1"}, checks);
  CHECK_THAT(err, Catch::Contains("2 problems"));
  CHECK_THAT(err, Catch::Contains(path + ":9:27: training.resume_from_checkpoint: 'somewhere' is not usable"));
}

TEST_CASE("a training key that belongs to another section points there", "[unit][spec]") {
  std::string path = write_spec("other_section.yaml", std::string(kValid) + "  loss_scale: 128\n  reduce_dtype: fp32\n");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":9:3: training.loss_scale: unknown key (in hftrain it is precision.loss_scale)"));
  CHECK_THAT(err, Catch::Contains(path + ":10:3: training.reduce_dtype: unknown key (in hftrain it is zero.reduce_dtype)"));
  // ddp_timeout is a TrainingArguments field (every to_dict() dump has it): the same setting as distributed's.
  RunSpec spec = load_run_spec(write_spec("hf_ddp_timeout.yaml", std::string(kValid) + "  ddp_timeout: 60\n"), {},
                               builtin_components().catalog());
  CHECK(spec.distributed.ddp_timeout == 60);
}

TEST_CASE("HF's training.bf16 is precision.bf16, the two spellings must agree", "[unit][spec]") {
  const Components& c = builtin_components();
  RunSpec spec = load_run_spec(write_spec("hf_bf16.yaml", std::string(kValid) + "  bf16: true\n"), {}, c.catalog());
  CHECK(spec.precision.bf16);
  std::string path = write_spec("hf_bf16_conflict.yaml", std::string(kValid) + "  bf16: true\nprecision: {bf16: false}\n");
  std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains(path + ":9:9: training.bf16: 'true' disagrees with precision.bf16"));
  // fp16 moves too, and is then refused on the CPU with the bf16 hint.
  std::string fp16 = run_spec_error(write_spec("hf_fp16.yaml", std::string(kValid) + "  fp16: true\n"));
  CHECK_THAT(fp16, Catch::Contains("use bf16 instead"));
}

TEST_CASE("HF's deprecated and other TrainingArguments names either act or are refused with a reason", "[unit][spec]") {
  const Components& c = builtin_components();
  // Renamed names are taken as the new ones, with HF's deprecation warning for the start of the log.
  RunSpec old = load_run_spec(write_spec("hf_old_names.yaml", std::string(kValid) +
                                                                  "  per_gpu_train_batch_size: 5\n"
                                                                  "  per_gpu_eval_batch_size: 7\n"
                                                                  "  evaluation_strategy: epoch\n"
                                                                  "  no_cuda: true\n"
                                                                  "  ddp_backend: gloo\n"
                                                                  "  eval_accumulation_steps: 4\n"
                                                                  "  full_determinism: true\n"
                                                                  "  run_name: trial-3\n"),
                              {}, c.catalog());
  CHECK(old.training.per_device_train_batch_size == 5);
  CHECK(old.training.per_device_eval_batch_size == 7);
  CHECK(old.training.eval_strategy == "epoch");
  CHECK(old.training.use_cpu);
  CHECK(old.distributed.backend == "gloo");
  CHECK(old.training.full_determinism);
  CHECK(old.training.run_name == "trial-3");
  std::string notes;
  for (const auto& n : old.notes) notes += n + "\n";
  CHECK_THAT(notes, Catch::Contains("training.per_gpu_train_batch_size: HF: \"Using deprecated `--per_gpu_train_batch_size`"));
  CHECK_THAT(notes, Catch::Contains("training.evaluation_strategy: HF: \"`evaluation_strategy` is deprecated"));
  CHECK_THAT(notes, Catch::Contains("(taken as training.use_cpu)"));
  CHECK_THAT(notes, Catch::Contains("training.eval_accumulation_steps: accepted, nothing to do here"));
  CHECK_THAT(notes, !Catch::Contains("ddp_backend"));  // a current HF name: no warning
  // The old and new spelling together must agree.
  const std::string both = write_spec("hf_both.yaml", std::string(kValid) + "  per_gpu_train_batch_size: 5\n"
                                                                            "  per_device_train_batch_size: 6\n");
  CHECK_THAT(run_spec_error(both), Catch::Contains("training.per_gpu_train_batch_size: '5' disagrees with "
                                               "training.per_device_train_batch_size: '6'"));
  // Settings this build cannot honour are refused, each with its reason, all at once.
  const std::string path = write_spec("hf_refused.yaml", std::string(kValid) +
                                                             "  tf32: true\n"
                                                             "  save_safetensors: false\n"
                                                             "  save_on_each_node: true\n"
                                                             "  ddp_find_unused_parameters: true\n"
                                                             "  local_rank: 3\n"
                                                             "  ddp_backend: mpi\n");
  const std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains("6 problems"));
  CHECK_THAT(err, Catch::Contains(path + ":9:9: training.tf32: TF32 needs an Ampere or newer NVIDIA GPU"));
  CHECK_THAT(err, Catch::Contains("training.save_safetensors: hftrain writes safetensors only"));
  CHECK_THAT(err, Catch::Contains("training.save_on_each_node: not available: only rank 0 writes"));
  CHECK_THAT(err, Catch::Contains("training.ddp_find_unused_parameters: not available"));
  CHECK_THAT(err, Catch::Contains("training.local_rank: the launcher sets each worker's local rank"));
  CHECK_THAT(err, Catch::Contains(path + ":14:16 (as training.ddp_backend): distributed.backend"));
  // Their neutral values are accepted.
  CHECK_NOTHROW(load_run_spec(write_spec("hf_neutral.yaml", std::string(kValid) + "  tf32: false\n  save_safetensors: true\n"
                                                                                  "  local_rank: -1\n  use_cpu: false\n"),
                              {}, c.catalog()));
}

TEST_CASE("the resolved spec keeps the precision section (run_spec.yaml is what eval and predict reload)", "[unit][spec]") {
  const Components& c = builtin_components();
  RunSpec spec = load_run_spec(write_spec("precision_dump.yaml", std::string(kValid) + "precision: {bf16: true}\n"), {},
                               c.catalog());
  const std::string dumped = dump_run_spec(spec, c.catalog());
  CHECK_THAT(dumped, Catch::Contains("precision:"));
  RunSpec again = load_run_spec(write_spec("precision_dump_again.yaml", dumped), {}, c.catalog());
  CHECK(again.precision.bf16);
}

TEST_CASE("cross-section rules live in one named list and report together, each at its key", "[unit][spec]") {
  std::set<std::string> names;
  for (const SpecRule& rule : spec_rules()) {
    CHECK(std::string(rule.name).size() > 0);
    CHECK(names.insert(rule.name).second);  // each rule once
  }
  CHECK(names.count("fp32_reduction_needs_mixed_precision") == 1);
  CHECK(names.count("parameter_offload_needs_stage_3") == 1);
  CHECK(names.count("return_sequences_within_beams") == 1);
  // Three sections disagreeing at once: every problem is listed, located at its own key.
  const std::string path = write_spec("cross_rules.yaml", std::string(kValid) +
                                                              "zero:\n  stage: 1\n  reduce_dtype: fp32\n  offload_param: cpu\n"
                                                              "generation:\n  num_beams: 2\n  num_return_sequences: 3\n");
  const std::string err = run_spec_error(path);
  CHECK_THAT(err, Catch::Contains("invalid run spec (3 problems)"));
  // Each located at its own line (the value's column), named by its key.
  CHECK_THAT(err, Catch::Matches("[\\s\\S]*" + path + ":11:[0-9]+: zero.reduce_dtype: gradients are already fp32[\\s\\S]*"));
  CHECK_THAT(err, Catch::Matches("[\\s\\S]*" + path + ":12:[0-9]+: zero.offload_param: offloading parameters needs zero.stage 3[\\s\\S]*"));
  CHECK_THAT(err, Catch::Matches("[\\s\\S]*" + path + ":15:[0-9]+: generation.num_return_sequences: must be <= "
                                 "generation.num_beams \\(2\\)[\\s\\S]*"));
}
