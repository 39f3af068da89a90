// training.deepspeed: the HF docs' ZeRO-2 / ZeRO-3 example configs load unchanged and land in the
// sections; "auto" is filled as HF's HfTrainerDeepSpeedConfig fills it (table below, written from
// transformers' integrations/deepspeed.py); disagreeing values are reported as HF reports them, all
// at once; misspelt keys get a did-you-mean, features hftrain lacks are refused, hints are logged.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "builtins/register_builtins.h"
#include "optim/adagrad.h"
#include "optim/deepspeed_schedules.h"
#include "util/error.h"
#include "spec_test_helpers.h"
#include "../ds_doc_configs.h"

using namespace hftrain;
using namespace hftrain_test;
using json = nlohmann::json;
using hftrain_test::kZero2;
using hftrain_test::kZero3;

namespace {

std::string write_ds_file(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_deepspeed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string spec_with(const std::string& deepspeed_line, const std::string& extra = "") {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32}\n"
         "data: {type: digit_reversal}\n"
         "training:\n"
         "  output_dir: /tmp/x\n"
         "  learning_rate: 0.001\n"
         "  per_device_train_batch_size: 4\n"
         "  gradient_accumulation_steps: 2\n"
         "  weight_decay: 0.01\n"
         "  adam_beta2: 0.98\n"
         "  deepspeed: " + deepspeed_line + "\n" + extra;
}

}  // namespace

TEST_CASE("the HF docs' ZeRO-2 config maps onto the sections and logs what has no effect", "[unit][deepspeed]") {
  const std::string ds = write_ds_file("ds_config_zero2.json", kZero2);
  RunSpec spec = load(write_ds_file("zero2.yaml", spec_with(ds)));
  CHECK(spec.zero.stage == 2);
  CHECK(spec.zero.offload_optimizer.device == "cpu");
  CHECK(spec.optimizer.type == "adamw");
  CHECK(spec.scheduler.type == "WarmupLR");
  CHECK(spec.precision.loss_scale_window == 1000);
  CHECK(spec.precision.hysteresis == 2);
  // reduce_bucket_size 2e8 elements of fp32 gradients.
  CHECK(spec.distributed.ddp_bucket_cap_mb == Approx(2e8 * 4 / (1024.0 * 1024.0)));
  CHECK(has_note(spec, "overlap_comm: accepted, no effect here"));
  CHECK(has_note(spec, "steps_per_print: accepted, no effect here"));
  CHECK(has_note(spec, "zero.offload_optimizer cpu"));
  CHECK_THAT(spec.origins.at("zero.stage"), Catch::Contains("ds_config_zero2.json:28:18") &&
                                                Catch::Contains("zero_optimization.stage"));
}

TEST_CASE("the HF docs' ZeRO-3 config fills the model-derived 'auto' values as HF does", "[unit][deepspeed]") {
  const std::string ds = write_ds_file("ds_config_zero3.json", kZero3);
  RunSpec spec = load(write_ds_file("zero3.yaml", spec_with(ds)));
  const int64_t hidden = 32;  // n_embd
  CHECK(spec.zero.stage == 3);
  CHECK(spec.zero.offload_param == "cpu");
  CHECK(spec.zero.stage3_prefetch_bucket_size == static_cast<int64_t>(0.9 * hidden * hidden));
  CHECK(spec.zero.stage3_param_persistence_threshold == 10 * hidden);
  CHECK(spec.zero.stage3_max_live_parameters == 1000000000);
  CHECK(spec.distributed.ddp_bucket_cap_mb == Approx(hidden * hidden * 4 / (1024.0 * 1024.0)));
  CHECK(spec.zero.stage3_gather_16bit_weights_on_model_save);  // placed from the file (true there)
  CHECK_THAT(spec.origins.at("zero.stage3_gather_16bit_weights_on_model_save"),
             Catch::Contains("zero_optimization.stage3_gather_16bit_weights_on_model_save"));
  // A bf16 run: 2-byte gradient buckets.
  RunSpec bf16 = load(write_ds_file("zero3_bf16.yaml", spec_with(ds, "precision: {bf16: true}\n")));
  CHECK(bf16.distributed.ddp_bucket_cap_mb == Approx(hidden * hidden * 2 / (1024.0 * 1024.0)));
}

TEST_CASE("'auto' is resolved from TrainingArguments and the run, as HF's table says", "[unit][deepspeed]") {
  const std::string ds = write_ds_file("auto_table.json", R"({
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                  "warmup_num_steps": "auto", "total_num_steps": "auto"}},
    "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto", "sub_group_size": "auto"}})");
  RunSpec spec = load(write_ds_file("auto_table.yaml", spec_with(ds, "precision: {bf16: true}\n")));
  const json r = json::parse(resolve_deepspeed_config(spec, /*world_size=*/3, /*total_steps=*/120, /*warmup_steps=*/12));
  // DeepSpeed key -> the TrainingArguments (or run) value HF puts there.
  CHECK(r["train_micro_batch_size_per_gpu"] == 4);        // per_device_train_batch_size
  CHECK(r["gradient_accumulation_steps"] == 2);           // gradient_accumulation_steps
  CHECK(r["train_batch_size"] == 3 * 4 * 2);              // world_size * per_device * accumulation
  CHECK(r["gradient_clipping"] == 1.0);                   // max_grad_norm (default)
  CHECK(r["optimizer"]["params"]["lr"] == 0.001);         // learning_rate
  CHECK(r["optimizer"]["params"]["betas"] == json::array({0.9, 0.98}));  // [adam_beta1, adam_beta2]
  CHECK(r["optimizer"]["params"]["eps"] == 1e-8);         // adam_epsilon
  CHECK(r["optimizer"]["params"]["weight_decay"] == 0.01);
  CHECK(r["scheduler"]["params"]["warmup_min_lr"] == 0);  // fill_only 0
  CHECK(r["scheduler"]["params"]["warmup_max_lr"] == 0.001);
  CHECK(r["scheduler"]["params"]["warmup_num_steps"] == 12);
  CHECK(r["scheduler"]["params"]["total_num_steps"] == 120);
  CHECK(r["bf16"]["enabled"] == true);
  CHECK(r["fp16"]["enabled"] == false);
  CHECK(r["zero_optimization"]["reduce_bucket_size"] == 32 * 32);                      // hidden^2
  CHECK(r["zero_optimization"]["stage3_prefetch_bucket_size"] == static_cast<int64_t>(0.9 * 32 * 32));
  CHECK(r["zero_optimization"]["stage3_param_persistence_threshold"] == 10 * 32);
  CHECK_FALSE(r["zero_optimization"].contains("sub_group_size"));  // "auto" HF does not fill: DeepSpeed drops it
  // The schedule options stay unset, so the schedule takes the run's steps (as the resolved file says).
  const auto& options = *static_cast<const DeepSpeedWarmupDecayLR::Options*>(spec.scheduler.options.get());
  CHECK_FALSE(options.total_num_steps.has_value());
  CHECK_FALSE(options.warmup_num_steps.has_value());
}

TEST_CASE("values that disagree with TrainingArguments are all reported, as HF words them", "[unit][deepspeed]") {
  const std::string ds = write_ds_file("mismatch.json", R"({
  "gradient_accumulation_steps": 4,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 0.5,
  "bf16": {"enabled": true},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.999], "eps": 1e-8}},
  "train_batch_size": 64
})");
  const std::string spec_path = write_ds_file("mismatch.yaml", spec_with(ds));
  const std::string err = load_error(spec_path);
  CHECK_THAT(err, Catch::Contains("mismatch.json:2:34: training.deepspeed gradient_accumulation_steps: ds "
                                  "gradient_accumulation_steps=4 vs hf gradient_accumulation_steps=2"));
  CHECK_THAT(err, Catch::Contains("ds gradient_clipping=0.5 vs hf max_grad_norm=1.0"));
  CHECK_THAT(err, Catch::Contains("ds bf16.enabled=true vs hf bf16|bf16_full_eval=false"));
  CHECK_THAT(err, Catch::Contains("ds optimizer.params.lr=0.0003 vs hf learning_rate=0.001"));
  CHECK_THAT(err, Catch::Contains("ds optimizer.params.betas=[0.9,0.999] vs hf adam_beta1, adam_beta2=[0.9,0.98]"));
  CHECK_THAT(err, Catch::Contains("(5 problems)"));  // micro batch and eps agree
  // train_batch_size needs the world size: checked at train start.
  RunSpec ok = load(write_ds_file("batch.yaml", spec_with(write_ds_file("batch.json", R"({"train_batch_size": 16})"))));
  CHECK_NOTHROW(resolve_deepspeed_config(ok, 2, 10, 0));
  try {
    resolve_deepspeed_config(ok, 3, 10, 0);
    FAIL("a train_batch_size that disagrees with the world size was accepted");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("batch.json:1:22: training.deepspeed train_batch_size: ds train_batch_size=16 vs "
                                         "hf world_size*per_device_train_batch_size*gradient_accumulation_steps=24"));
  }
}

TEST_CASE("misspelt, unavailable and conflicting DeepSpeed keys are refused with their position", "[unit][deepspeed]") {
  const std::string ds = write_ds_file("typos.json", R"({
  "zero_optimisation": {"stage": 2},
  "fp16": {"enabled": false, "initial_scale_powr": 12},
  "zero_optimization": {"stage": 2, "overlap_com": true, "zero_quantized_weights": true, "zero_hpz_partition_size": 1},
  "optimizer": {"type": "Lamb"},
  "scheduler": {"type": "OneCycle"},
  "prescale_gradients": false,
  "curriculum_learning": {"enabled": true}
})");
  const std::string err = load_error(write_ds_file("typos.yaml", spec_with(ds)));
  CHECK_THAT(err, Catch::Contains("typos.json:2:24: zero_optimisation: unknown DeepSpeed key 'zero_optimisation' (did you "
                                  "mean 'zero_optimization'?)"));
  CHECK_THAT(err, Catch::Contains("fp16.initial_scale_powr: unknown DeepSpeed key 'initial_scale_powr' (did you mean "
                                  "'initial_scale_power'?)"));
  CHECK_THAT(err, Catch::Contains("zero_optimization.overlap_com: unknown DeepSpeed key 'overlap_com' (did you mean "
                                  "'overlap_comm'?)"));
  CHECK_THAT(err, Catch::Contains("zero_optimization.zero_quantized_weights: quantised weight gathers"));
  CHECK_THAT(err, Catch::Contains("optimizer.type: 'Lamb' is not available"));
  CHECK_THAT(err, Catch::Contains("scheduler.type: 'OneCycle' has no equivalent in hftrain yet"));
  CHECK_THAT(err, Catch::Contains("curriculum_learning: curriculum learning is not available"));
  CHECK_THAT(err, !Catch::Contains("prescale_gradients") && !Catch::Contains("zero_hpz_partition_size"));  // neutral values
  // The same setting in the spec's own section and in the DeepSpeed config must agree.
  const std::string stage2 = write_ds_file("stage2.json", R"({"zero_optimization": {"stage": 2}})");
  CHECK_THAT(load_error(write_ds_file("conflict.yaml", spec_with(stage2, "zero: {stage: 1}\n"))),
             Catch::Contains("stage2.json:1:33: training.deepspeed zero_optimization.stage: '2' disagrees with zero.stage: '1'"));
  CHECK(load(write_ds_file("agree.yaml", spec_with(stage2, "zero: {stage: 2}\n"))).zero.stage == 2);
  // A value the section's schema refuses is located in the DeepSpeed file.
  const std::string stage5 = write_ds_file("stage5.json", R"({"zero_optimization": {"stage": 5}})");
  CHECK_THAT(load_error(write_ds_file("stage5.yaml", spec_with(stage5))), Catch::Contains("stage5.json:1:33 (as training.deepspeed "
                                                                                       "zero_optimization.stage)"));
  CHECK_THAT(load_error(write_ds_file("missing.yaml", spec_with("no_such_ds.json"))),
             Catch::Contains("cannot read DeepSpeed config 'no_such_ds.json'"));
  CHECK_THAT(load_error(write_ds_file("dup.yaml", spec_with(write_ds_file("dup.json", R"({"steps_per_print": 1, "steps_per_print": 2})")))),
             Catch::Contains("duplicate key"));
}

TEST_CASE("an inline DeepSpeed mapping works like a file, Adam without adam_w_mode is torch Adam", "[unit][deepspeed]") {
  RunSpec spec = load(write_ds_file("inline.yaml", spec_with("{zero_optimization: {stage: 1}, optimizer: {type: Adam, params: "
                                                          "{adam_w_mode: false}}, communication_data_type: fp32}",
                                                          "precision: {bf16: true}\n")));
  CHECK(spec.zero.stage == 1);
  CHECK(spec.optimizer.type == "adam");
  CHECK(spec.zero.reduce_dtype == "fp32");
  CHECK(load(write_ds_file("inline2.yaml", spec_with("{optimizer: {type: Adam}}"))).optimizer.type == "adamw");
  CHECK(load(write_ds_file("inline3.yaml", spec_with("{optimizer: {type: SGD, params: {momentum: 0.9}}}"))).optimizer.type == "sgd");
  RunSpec cosine = load(write_ds_file("inline5.yaml", spec_with("{scheduler: {type: WarmupCosineLR, params: {cos_min_ratio: 0.1, "
                                                             "warmup_num_steps: auto, total_num_steps: auto}}}")));
  CHECK(cosine.scheduler.type == "WarmupCosineLR");
  CHECK_THAT(load_error(write_ds_file("inline6.yaml", spec_with("{scheduler: {type: WarmupCosineLR, params: {warmup_max_lr: 1}}}"))),
             Catch::Contains("unknown DeepSpeed key 'warmup_max_lr'"));
  // DeepSpeed's Adagrad: eps "auto" is HF's adam_epsilon, and its own options land in the optimizer section.
  RunSpec adagrad = load(write_ds_file("inline4.yaml", spec_with("{optimizer: {type: Adagrad, params: {eps: auto, lr_decay: 0.01}}}")));
  REQUIRE(adagrad.optimizer.type == "adagrad");
  const auto& options = *static_cast<const Adagrad::Options*>(adagrad.optimizer.options.get());
  CHECK(options.eps == 1e-8);
  CHECK(options.lr_decay == 0.01);
}
