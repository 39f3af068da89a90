// HF users' files and command lines through the real binary: complete TrainingArguments to_dict() dumps
// (transformers 4.46 and v5) in `training:`, HfArgumentParser flags after the spec (run_clm's --torch_dtype and
// --attn_implementation among them), the command line winning over the file in any spelling, FairScale's sharded_ddp names on two workers, and torch.distributed.launch's --local_rank
// (with the launcher itself from python3-torch as the reference).
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test_dist_helpers.h"

using namespace hftrain_test;

namespace {

// transformers 4.46 TrainingArguments(output_dir="out").to_dict() (Seq2SeqTrainingArguments' fields at the
// end), every field at HF's default as HF documents it: to_dict() writes enums as their values, "" lists
// as [], the tokens as "<HUB_TOKEN>", logging_dir under output_dir/runs, run_name = output_dir, and the
// local_rank of one process (0).
const char* kToDict4_46 = R"({
  "output_dir": "out", "overwrite_output_dir": false, "do_train": false, "do_eval": false, "do_predict": false,
  "eval_strategy": "no", "prediction_loss_only": false, "per_device_train_batch_size": 8,
  "per_device_eval_batch_size": 8, "per_gpu_train_batch_size": null, "per_gpu_eval_batch_size": null,
  "gradient_accumulation_steps": 1, "eval_accumulation_steps": null, "eval_delay": 0, "torch_empty_cache_steps": null,
  "learning_rate": 5e-05, "weight_decay": 0.0, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-08,
  "max_grad_norm": 1.0, "num_train_epochs": 3.0, "max_steps": -1, "lr_scheduler_type": "linear",
  "lr_scheduler_kwargs": {}, "warmup_ratio": 0.0, "warmup_steps": 0, "log_level": "passive",
  "log_level_replica": "warning", "log_on_each_node": true, "logging_dir": "out/runs/Nov25_00-00-00_host",
  "logging_strategy": "steps", "logging_first_step": false, "logging_steps": 500, "logging_nan_inf_filter": true,
  "save_strategy": "steps", "save_steps": 500, "save_total_limit": null, "save_safetensors": true,
  "save_on_each_node": false, "save_only_model": false, "restore_callback_states_from_checkpoint": false,
  "no_cuda": false, "use_cpu": false, "use_mps_device": false, "seed": 42, "data_seed": null, "jit_mode_eval": false,
  "use_ipex": false, "bf16": false, "fp16": false, "fp16_opt_level": "O1", "half_precision_backend": "auto",
  "bf16_full_eval": false, "fp16_full_eval": false, "tf32": null, "local_rank": 0, "ddp_backend": null,
  "tpu_num_cores": null, "tpu_metrics_debug": false, "debug": [], "dataloader_drop_last": false, "eval_steps": null,
  "dataloader_num_workers": 0, "dataloader_prefetch_factor": null, "past_index": -1, "run_name": "out",
  "disable_tqdm": false, "remove_unused_columns": true, "label_names": null, "load_best_model_at_end": false,
  "metric_for_best_model": null, "greater_is_better": null, "ignore_data_skip": false, "fsdp": [],
  "fsdp_min_num_params": 0,
  "fsdp_config": {"min_num_params": 0, "xla": false, "xla_fsdp_v2": false, "xla_fsdp_grad_ckpt": false},
  "fsdp_transformer_layer_cls_to_wrap": null,
  "accelerator_config": {"split_batches": false, "dispatch_batches": null, "even_batches": true,
                         "use_seedable_sampler": true, "non_blocking": false, "gradient_accumulation_kwargs": null},
  "deepspeed": null, "label_smoothing_factor": 0.0, "optim": "adamw_torch", "optim_args": null, "adafactor": false,
  "group_by_length": false, "length_column_name": "length", "report_to": ["tensorboard"],
  "ddp_find_unused_parameters": null, "ddp_bucket_cap_mb": null, "ddp_broadcast_buffers": null,
  "dataloader_pin_memory": true, "dataloader_persistent_workers": false, "skip_memory_metrics": true,
  "use_legacy_prediction_loop": false, "push_to_hub": false, "resume_from_checkpoint": null, "hub_model_id": null,
  "hub_strategy": "every_save", "hub_token": "<HUB_TOKEN>", "hub_private_repo": null, "hub_always_push": false,
  "gradient_checkpointing": false, "gradient_checkpointing_kwargs": null, "include_inputs_for_metrics": false,
  "include_for_metrics": [], "eval_do_concat_batches": true, "fp16_backend": "auto", "push_to_hub_model_id": null,
  "push_to_hub_organization": null, "push_to_hub_token": "<PUSH_TO_HUB_TOKEN>", "mp_parameters": "",
  "auto_find_batch_size": false, "full_determinism": false, "torchdynamo": null, "ray_scope": "last",
  "ddp_timeout": 1800, "torch_compile": false, "torch_compile_backend": null, "torch_compile_mode": null,
  "dispatch_batches": null, "split_batches": null, "include_tokens_per_second": false,
  "include_num_input_tokens_seen": false, "neftune_noise_alpha": null, "optim_target_modules": null,
  "batch_eval_metrics": false, "eval_on_start": false, "use_liger_kernel": false, "eval_use_gather_object": false,
  "average_tokens_across_devices": false,
  "sortish_sampler": false, "predict_with_generate": false, "generation_max_length": null,
  "generation_num_beams": null, "generation_config": null
})";

// transformers v5 TrainingArguments(output_dir="out").to_dict() on torch >= 2.8, every field at v5's default:
// warmup_steps (a ratio when below 1) without v4's warmup_ratio and logging_dir (kept as deprecated, null),
// optim adamw_torch_fused, report_to "none" (written as []), include_num_input_tokens_seen "no",
// average_tokens_across_devices true, train_sampling_strategy in place of group_by_length, the Trackio fields,
// and none of the fields v5 removed (overwrite_output_dir, per_gpu_*, no_cuda, fp16_backend, ...).
const char* kToDict5 = R"({
  "output_dir": "out", "per_device_train_batch_size": 8, "num_train_epochs": 3.0, "max_steps": -1,
  "learning_rate": 5e-05, "lr_scheduler_type": "linear", "lr_scheduler_kwargs": null, "warmup_steps": 0,
  "optim": "adamw_torch_fused", "optim_args": null, "weight_decay": 0.0, "adam_beta1": 0.9, "adam_beta2": 0.999,
  "adam_epsilon": 1e-08, "optim_target_modules": null, "gradient_accumulation_steps": 1,
  "average_tokens_across_devices": true, "max_grad_norm": 1.0, "label_smoothing_factor": 0.0, "bf16": false,
  "fp16": false, "bf16_full_eval": false, "fp16_full_eval": false, "tf32": null, "gradient_checkpointing": false,
  "gradient_checkpointing_kwargs": null, "torch_compile": false, "torch_compile_backend": null,
  "torch_compile_mode": null, "use_liger_kernel": false, "liger_kernel_config": null, "use_cache": false,
  "neftune_noise_alpha": null, "torch_empty_cache_steps": null, "auto_find_batch_size": false,
  "logging_strategy": "steps", "logging_steps": 500, "logging_first_step": false, "log_on_each_node": true,
  "logging_nan_inf_filter": true, "include_num_input_tokens_seen": "no", "log_level": "passive",
  "log_level_replica": "warning", "disable_tqdm": false, "report_to": [], "run_name": null,
  "project": "huggingface", "trackio_space_id": "trackio", "eval_strategy": "no", "eval_steps": null,
  "eval_delay": 0, "per_device_eval_batch_size": 8, "prediction_loss_only": false, "eval_on_start": false,
  "eval_do_concat_batches": true, "eval_use_gather_object": false, "eval_accumulation_steps": null,
  "include_for_metrics": [], "batch_eval_metrics": false, "save_only_model": false, "save_strategy": "steps",
  "save_steps": 500, "save_on_each_node": false, "save_total_limit": null, "enable_jit_checkpoint": false,
  "push_to_hub": false, "hub_token": "<HUB_TOKEN>", "hub_private_repo": null, "hub_model_id": null,
  "hub_strategy": "every_save", "hub_always_push": false, "hub_revision": null, "load_best_model_at_end": false,
  "metric_for_best_model": null, "greater_is_better": null, "ignore_data_skip": false,
  "restore_callback_states_from_checkpoint": false, "full_determinism": false, "seed": 42, "data_seed": null,
  "use_cpu": false,
  "accelerator_config": {"split_batches": false, "dispatch_batches": null, "even_batches": true,
                         "use_seedable_sampler": true, "non_blocking": false, "gradient_accumulation_kwargs": null},
  "parallelism_config": null, "dataloader_drop_last": false, "dataloader_num_workers": 0,
  "dataloader_pin_memory": true, "dataloader_persistent_workers": false, "dataloader_prefetch_factor": null,
  "remove_unused_columns": true, "label_names": null, "train_sampling_strategy": "random",
  "length_column_name": "length", "ddp_find_unused_parameters": null, "ddp_bucket_cap_mb": null,
  "ddp_broadcast_buffers": null, "ddp_backend": null, "ddp_timeout": 1800, "fsdp": null, "fsdp_config": null,
  "deepspeed": null, "debug": [], "skip_memory_metrics": true, "do_train": false, "do_eval": false,
  "do_predict": false, "resume_from_checkpoint": null, "warmup_ratio": null, "logging_dir": null, "local_rank": -1
})";

const char* kModelAndData = "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                            "data: {type: digit_reversal, num_digits: 3, train_size: 48, eval_size: 8, test_size: 0}\n";

// `text` with the first occurrence of `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

int free_port() { return 20000 + static_cast<int>(::getpid() % 20000); }

}  // namespace

TEST_CASE("a complete TrainingArguments to_dict() dump loads in training: and trains", "[integration][hf_args]") {
  const std::string dir = fresh_dir("hf_to_dict");
  write_text(dir + "/spec.yaml", std::string(kModelAndData) + "training: " + kToDict4_46 + "\n");
  CliResult d = run_hftrain("train spec.yaml --dump-config", dir);
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK_THAT(d.output, Catch::Contains("ddp_timeout: 1800  # training.ddp_timeout: 1800 (spec.yaml:"));
  CHECK_THAT(d.output, Catch::Contains("save_total_limit: 0"));
  CHECK_THAT(d.output, Catch::Contains("local_rank: 0"));
  // transformers <= 4.45 also wrote evaluation_strategy (null by default).
  write_text(dir + "/spec445.yaml", std::string(kModelAndData) + "training: " +
                                        replaced(kToDict4_46, "\"eval_strategy\": \"no\",",
                                                 "\"eval_strategy\": \"no\", \"evaluation_strategy\": null,") + "\n");
  CliResult old = run_hftrain("train spec445.yaml --dump-config", dir);
  INFO(old.output);
  CHECK(old.exit_code == 0);
  // It trains, with HF-style flags after the spec overriding the dump.
  CliResult r = run_hftrain("train spec.yaml --max_steps 2 --logging_steps=1 --report_to none --do_eval", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(logged_losses(dir + "/out/trainer_state.json").size() == 2);
  CHECK(std::filesystem::exists(dir + "/out/eval_results.json"));
}

TEST_CASE("a transformers v5 to_dict() dump trains, with run_clm's --torch_dtype and --attn_implementation", "[integration][hf_args]") {
  const std::string dir = fresh_dir("hf_to_dict_v5");
  write_text(dir + "/spec.yaml", std::string(kModelAndData) + "training: " + kToDict5 + "\n");
  CliResult d = run_hftrain("train spec.yaml --dump-config --warmup_steps 0.5 --torch_dtype bfloat16", dir);
  INFO(d.output);
  REQUIRE(d.exit_code == 0);
  CHECK_THAT(d.output, Catch::Contains("type: adamw  # training.optim: adamw_torch_fused (spec.yaml:"));
  CHECK_THAT(d.output, Catch::Contains("warmup_steps: 0.5  # --set training.warmup_steps"));
  // The flag wins over the dump's bf16: false, as any command-line value over the file's.
  CHECK_THAT(d.output, Catch::Contains("bf16: true  # model.torch_dtype: bfloat16 (--set model.torch_dtype, over 'false' at "
                                       "spec.yaml:"));
  CHECK_THAT(d.output, Catch::Contains("include_num_input_tokens_seen: no"));
  CHECK_THAT(d.output, Catch::Contains("report_to: []"));
  // It trains: a warmup ratio of 0.5 over 4 steps is 2 warmup steps (each log holds the rate of the next step, as HF's).
  CliResult r = run_hftrain("train spec.yaml --max_steps 4 --logging_steps=1 --warmup_steps 0.5 --dtype float32 "
                            "--attn_implementation sdpa --report_to jsonl",
                            dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("model.torch_dtype float32: the weights load in float32"));
  CHECK_THAT(r.output, Catch::Contains("model.attn_implementation sdpa: hftrain's own attention computes the same"));
  const auto logs = train_logs(dir + "/out/trainer_state.json");
  REQUIRE(logs.size() == 4);
  CHECK(logs[0]["learning_rate"].get<double>() == Approx(2.5e-05));  // step 1 of 2 warmup steps
  CHECK(logs[1]["learning_rate"].get<double>() == Approx(5e-05));    // the peak at the end of warmup
  CHECK(std::filesystem::exists(dir + "/out/logs.jsonl"));
  // What is not built is refused naming the flag's key and the reason.
  CliResult fa = run_hftrain("train spec.yaml --attn_implementation flash_attention_3", dir);
  CHECK(fa.exit_code == 2);
  CHECK_THAT(fa.output, Catch::Contains("model.attn_implementation: 'flash_attention_3' is not built"));
  CliResult dt = run_hftrain("train spec.yaml --torch_dtype float64", dir);
  CHECK(dt.exit_code == 2);
  CHECK_THAT(dt.output, Catch::Contains("model.torch_dtype: 'float64' is not a dtype run_clm loads a model in"));
  CliResult wandb = run_hftrain("train spec.yaml --report_to wandb", dir);
  CHECK(wandb.exit_code == 2);
  CHECK_THAT(wandb.output, Catch::Contains("training.report_to: 'wandb' is not built") &&
                               Catch::Contains("output_dir/logs.jsonl"));
}

TEST_CASE("a dump whose unbuilt fields ask for something lists exactly those problems", "[integration][hf_args]") {
  const std::string dir = fresh_dir("hf_to_dict_bad");
  std::string dump = kToDict4_46;
  dump = replaced(dump, "\"push_to_hub\": false", "\"push_to_hub\": true");
  dump = replaced(dump, "\"use_mps_device\": false", "\"use_mps_device\": true");
  dump = replaced(dump, "\"torch_compile\": false", "\"torch_compile\": true");
  dump = replaced(dump, "\"debug\": []", "\"debug\": [\"underflow_overflow\"]");
  dump = replaced(dump, "\"fp16_opt_level\": \"O1\"", "\"fp16_opt_level\": \"O2\"");
  dump = replaced(dump, "\"split_batches\": false", "\"split_batches\": true");
  dump = replaced(dump, "\"local_rank\": 0", "\"local_rank\": 3");
  write_text(dir + "/spec.yaml", std::string(kModelAndData) + "training: " + dump + "\n");
  CliResult r = run_hftrain("train spec.yaml --dump-config", dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("invalid run spec (7 problems)"));
  CHECK_THAT(r.output, Catch::Contains("training.push_to_hub: 'true' is not available: nothing is uploaded"));
  CHECK_THAT(r.output, Catch::Contains("training.use_mps_device: 'true' is not available: Apple MPS devices"));
  CHECK_THAT(r.output, Catch::Contains("training.torch_compile: 'true' is not available: torch.compile"));
  CHECK_THAT(r.output, Catch::Contains("training.debug: '[underflow_overflow]' is not available: TPU metrics"));
  CHECK_THAT(r.output, Catch::Contains("training.fp16_opt_level: 'O2' is not available: apex"));
  CHECK_THAT(r.output, Catch::Contains("training.accelerator_config.split_batches: 'true' is not available"));
  CHECK_THAT(r.output, Catch::Contains("training.local_rank: the launcher sets each worker's local rank"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out"));
}

TEST_CASE("HfArgumentParser flags after the spec are overrides, and unknown ones get a did-you-mean", "[integration][hf_args]") {
  const std::string dir = fresh_dir("hf_flags");
  write_text(dir + "/spec.yaml", std::string(kModelAndData) + "training: {output_dir: out, max_steps: 4}\n");
  CliResult a = run_hftrain("train spec.yaml --learning_rate 1e-4 --output_dir x --dump-config --bf16 true --do_eval "
                            "--gradient_checkpointing=false --nproc_per_node 1",
                            dir);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("learning_rate: 0.0001  # --set training.learning_rate"));
  CHECK_THAT(a.output, Catch::Contains("output_dir: x  # --set training.output_dir"));
  CHECK_THAT(a.output, Catch::Contains("bf16: true  # training.bf16: true (--set training.bf16)"));
  CHECK_THAT(a.output, Catch::Contains("do_eval: true  # --set training.do_eval"));
  CliResult b = run_hftrain("train spec.yaml --learning_rate=0.5 --dump-config", dir);
  CHECK_THAT(b.output, Catch::Contains("learning_rate: 0.5  # --set training.learning_rate"));
  // run_clm's data and model flags.
  write_text(dir + "/train.txt", "hello world\nsecond line of text\n");
  write_text(dir + "/valid.txt", "a validation line\n");
  std::filesystem::create_directories(dir + "/tiny");
  write_text(dir + "/tiny/config.json",
             R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 256})");
  write_text(dir + "/clm.yaml", "data: {type: text, tokenizer: bytes}\ntraining: {output_dir: out}\n");
  CliResult c = run_hftrain("train clm.yaml --model_name_or_path tiny --train_file train.txt --validation_file valid.txt "
                            "--block_size 8 --max_train_samples 2 --dump-config",
                            dir);
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.output, Catch::Contains("from_pretrained: tiny"));
  CHECK_THAT(c.output, Catch::Contains("train_file: train.txt  # --set data.train_file"));
  CHECK_THAT(c.output, Catch::Contains("validation_file: valid.txt  # --set data.validation_file"));
  CHECK_THAT(c.output, Catch::Contains("block_size: 8  # --set data.block_size"));
  CHECK_THAT(c.output, Catch::Contains("max_train_samples: 2  # --set data.max_train_samples"));
  // Unknown flags and keys without their section.
  CliResult u = run_hftrain("train spec.yaml --lerning_rate 1e-4", dir);
  CHECK(u.exit_code == 2);
  CHECK_THAT(u.output, Catch::Contains("unknown option --lerning_rate (did you mean 'learning_rate'?)"));
  CliResult s = run_hftrain("train spec.yaml --set learning_rate=1e-4", dir);
  CHECK(s.exit_code == 2);
  CHECK_THAT(s.output, Catch::Contains("learning_rate: unknown section (did you mean 'training.learning_rate'?"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out"));
}

TEST_CASE("a value on the command line wins over the file in any spelling, and --dump-config says so", "[integration][hf_args]") {
  const std::string dir = fresh_dir("hf_cli_wins");
  write_text(dir + "/spec.yaml", std::string(kModelAndData) + "scheduler: {type: linear}\ntraining: {output_dir: out}\n");
  for (const std::string given : {"--set training.lr_scheduler_type=cosine", "--lr_scheduler_type cosine"}) {
    CliResult r = run_hftrain("train spec.yaml --dump-config " + given, dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("type: cosine  # training.lr_scheduler_type: cosine (--set "
                                         "training.lr_scheduler_type, over 'linear' at spec.yaml:3:19)"));
  }
  // The file's HF spelling, the command line's own.
  write_text(dir + "/hf.yaml", std::string(kModelAndData) + "training: {output_dir: out, lr_scheduler_type: linear}\n");
  CliResult h = run_hftrain("train hf.yaml --dump-config --set scheduler.type=cosine", dir);
  INFO(h.output);
  REQUIRE(h.exit_code == 0);
  CHECK_THAT(h.output, Catch::Contains("type: cosine  # --set scheduler.type"));
}

TEST_CASE("sharded_ddp trains as the ZeRO stage it names, with the native spelling's losses", "[integration][hf_args][dist]") {
  const std::string dir = dist_dir("hf_sharded_ddp");
  write_text(dir + "/spec.yaml", dist_spec(3));
  struct Pair {
    std::string hf, native, engine;
  };
  const std::vector<Pair> pairs = {
      {"--sharded_ddp simple", "--set zero.stage=2", "engine: zero stage 2, world size 2"},
      {"--sharded_ddp 'zero_dp_3 cpu_offload'", "--set zero.stage=3 --set zero.offload_optimizer=cpu --set zero.offload_param=cpu",
       "engine: zero stage 3, world size 2"},
  };
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const Pair& p = pairs[k];
    INFO(p.hf);
    const std::string hf_dir = "hf" + std::to_string(k), native_dir = "native" + std::to_string(k);
    CliResult hf = run_hftrain("train spec.yaml --nproc-per-node 2 --output_dir " + hf_dir + " " + p.hf, dir);
    INFO(hf.output);
    REQUIRE(hf.exit_code == 0);
    CHECK_THAT(hf.output, Catch::Contains(p.engine));
    CHECK_THAT(hf.output, Catch::Contains("(FairScale) is zero.stage"));
    CliResult native = run_hftrain("train spec.yaml --nproc-per-node 2 --output_dir " + native_dir + " " + p.native, dir);
    INFO(native.output);
    REQUIRE(native.exit_code == 0);
    CHECK_THAT(native.output, Catch::Contains(p.engine));
    const auto got = train_logs(dir + "/" + hf_dir + "/trainer_state.json");
    const auto want = train_logs(dir + "/" + native_dir + "/trainer_state.json");
    REQUIRE(got.size() == 3);
    REQUIRE(want.size() == 3);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i]["loss"] == want[i]["loss"]);
  }
  CliResult offload = run_hftrain("train spec.yaml --dump-config --sharded_ddp 'zero_dp_2 offload'", dir);
  CHECK_THAT(offload.output, Catch::Contains("offload_optimizer: {device: cpu, nvme_path: \"\", buffer_count: 4}  # device from "
                                             "training.sharded_ddp: zero_dp_2 offload (--set training.sharded_ddp)"));
  // Conflicting spellings exit 2 naming both.
  write_text(dir + "/both.yaml", dist_spec(3, "  sharded_ddp: zero_dp_2\n  fsdp: full_shard\n") + "zero: {stage: 1}\n");
  CliResult both = run_hftrain("train both.yaml", dir);
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.output, Catch::Contains("training.sharded_ddp: 'zero_dp_2' and training.fsdp (both.yaml:"));
  CHECK_THAT(both.output, Catch::Contains("training.sharded_ddp: 'zero_dp_2' and zero.stage (both.yaml:"));
}

TEST_CASE("the --local_rank flag as torch.distributed.launch passes it", "[integration][hf_args][dist]") {
  const std::string dir = dist_dir("hf_local_rank");
  write_text(dir + "/spec.yaml", dist_spec(2, "  log_level_replica: debug\n"));
  const std::string bin = HFTRAIN_BINARY;
  const std::string port = std::to_string(free_port());
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 ";
  // The legacy launcher's environment without LOCAL_RANK: the flag is the worker's local rank.
  CliResult r = run_shell("cd '" + dir + "' && (" + env + "RANK=0 timeout 120 '" + bin +
                          "' --local_rank=0 train spec.yaml --output_dir legacy > rank0.log 2>&1 & " + env +
                          "RANK=1 timeout 120 '" + bin + "' --local-rank=1 train spec.yaml --output_dir legacy 2>&1; wait)");
  INFO(r.output + read_text(dir + "/rank0.log"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[rank 1] debug: worker rank 1 of 2 (local rank 1 of 2"));
  CHECK(train_logs(dir + "/legacy/trainer_state.json").size() == 2);
  // A flag that disagrees with LOCAL_RANK names both.
  CliResult bad = run_shell("cd '" + dir + "' && LOCAL_RANK=0 RANK=0 WORLD_SIZE=1 '" + bin +
                            "' --local_rank=1 train spec.yaml --dump-config 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--local_rank=1 (from the launcher's command line) disagrees with LOCAL_RANK=0"));
  // The launchers themselves (python3-torch). torch.distributed.launch runs a Python script with
  // `--local_rank=N` before the script's arguments (and sets LOCAL_RANK); a two-line script hands them to
  // hftrain. With --no_python it insists on --use_env (no flag, the environment only), as torchrun does.
  if (run_shell("/usr/bin/python3 -c 'import torch.distributed.run' 2>&1").exit_code != 0) {
    WARN("python3-torch is not installed: the launcher runs are skipped");
    return;
  }
  // One write(2) per line: both workers share the pipe, and print() may write its pieces separately.
  write_text(dir + "/run_hftrain.py", "import os, sys\nos.write(1, ('argv: ' + ' '.join(sys.argv[1:]) + '\\n').encode())\n"
                                      "os.execv('" + bin + "', ['hftrain'] + sys.argv[1:])\n");
  // Debian's torch 1.13 under Python 3.12: Std.from_str("0") finds no member (IntFlag iteration skips 0)
  // and the launchers fail before starting anything; the shim returns Std.NONE there and runs the launcher.
  write_text(dir + "/launcher.py",
             "import runpy, sys\n"
             "from torch.distributed.elastic.multiprocessing import api\n"
             "_from_str = api.Std.from_str.__func__\n"
             "api.Std.from_str = classmethod(lambda cls, vm: api.Std.NONE if _from_str(cls, vm) is None else _from_str(cls, vm))\n"
             "module = sys.argv.pop(1)\n"
             "sys.argv[0] = module\n"
             "runpy.run_module(module, run_name='__main__', alter_sys=True)\n");
  // torch's elastic agent hosts its own store on --master_port, so each worker here only validates its
  // command line and prints the resolved spec (--dump-config): the launcher's own argv and environment.
  const std::string launch = "/usr/bin/python3 launcher.py torch.distributed.launch --nproc_per_node 2 --master_port " +
                             std::to_string(free_port() + 1) + " run_hftrain.py train spec.yaml --dump-config 2>&1";
  CliResult l = run_shell("cd '" + dir + "' && timeout 300 " + launch);
  INFO(l.output);
  REQUIRE(l.exit_code == 0);
  CHECK_THAT(l.output, Catch::Contains("argv: --local_rank=1 train spec.yaml --dump-config"));
  std::size_t dumps = 0;
  for (auto at = l.output.find("# resolved run spec"); at != std::string::npos; at = l.output.find("# resolved run spec", at + 1))
    ++dumps;
  CHECK(dumps == 2);
  const std::string env_only = "/usr/bin/python3 launcher.py torch.distributed.launch --no_python --use_env --nproc_per_node 2 "
                               "--master_port " + std::to_string(free_port() + 2) + " '" + bin +
                               "' train spec.yaml --dump-config 2>&1";
  CliResult e = run_shell("cd '" + dir + "' && timeout 300 " + env_only);
  INFO(e.output);
  CHECK(e.exit_code == 0);
}
