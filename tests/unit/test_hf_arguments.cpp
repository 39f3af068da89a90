// HF habits in the run spec and on the command line: sharded_ddp (FairScale) onto ZeRO, the unbuilt
// TrainingArguments fields at values that ask for nothing, nulls as HF's None, HfArgumentParser flags as
// overrides, torch.distributed.launch's --local_rank against the environment, the command line winning over
// the file in any spelling, run_clm's model arguments, HF's trackers, Hub ids, and transformers v5's fields.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "builtins/register_builtins.h"
#include "optim/schedule.h"
#include "runspec/hf_flags.h"
#include "tokenizers/load_tokenizer.h"
#include "util/error.h"
#include "util/hub_ids.h"
#include "spec_test_helpers.h"
#include "scratch_files.h"

using namespace hftrain;
using namespace hftrain_test;

namespace {

const char* kSpec = "model: {type: gpt, n_layer: 1}\ndata: {type: digit_reversal}\ntraining:\n  output_dir: x\n";

std::vector<std::string> rewrite(const std::vector<std::string>& args) {
  return rewrite_hf_flags(args, [](const std::string& flag) { return flag == "--set" || flag == "--dump-config"; });
}

}  // namespace

TEST_CASE("sharded_ddp values map onto the ZeRO stage and the CPU offload that stage has", "[unit][spec][hf_args]") {
  const std::string path = write_spec("sharded.yaml", kSpec);
  struct Case {
    std::string value;
    int64_t stage;
    std::string offload_optimizer, offload_param;
  };
  const std::vector<Case> cases = {
      {"simple", 2, "none", "none"},
      {"zero_dp_2", 2, "none", "none"},
      {"zero_dp_3", 3, "none", "none"},
      {"zero_dp_2 offload", 2, "cpu", "none"},
      {"zero_dp_2 cpu_offload", 2, "cpu", "none"},
      {"[zero_dp_3, offload, auto_wrap]", 3, "cpu", "cpu"},
  };
  for (const auto& c : cases) {
    INFO(c.value);
    RunSpec spec = load(path, {"training.sharded_ddp=" + c.value});
    CHECK(spec.zero.stage == c.stage);
    CHECK(spec.zero.offload_optimizer.device == c.offload_optimizer);
    CHECK(spec.zero.offload_param == c.offload_param);
    CHECK(has_note(spec, "training.sharded_ddp '") );
    CHECK(has_note(spec, "(FairScale) is zero.stage " + std::to_string(c.stage)));
  }
  // Nothing asked: HF's default "" (or [] in a to_dict() dump).
  for (const std::string v : {"\"\"", "[]", "null"}) {
    RunSpec spec = load(path, {"training.sharded_ddp=" + v});
    CHECK(spec.zero.stage == 0);
    CHECK_FALSE(has_note(spec, "sharded_ddp"));
  }
  // HF's own rules for combining the words.
  CHECK_THAT(load_error(path, {"training.sharded_ddp=simple zero_dp_2"}),
             Catch::Contains("`--sharded_ddp simple` is not compatible with any other option"));
  CHECK_THAT(load_error(path, {"training.sharded_ddp=zero_dp_2 zero_dp_3"}), Catch::Contains("not compatible with `--sharded_ddp zero_dp_3`"));
  CHECK_THAT(load_error(path, {"training.sharded_ddp=offload"}), Catch::Contains("`--sharded_ddp offload` can't work on its own"));
  CHECK_THAT(load_error(path, {"training.sharded_ddp=zero_dp2"}),
             Catch::Contains("'zero_dp2' is not a sharded_ddp option (did you mean 'zero_dp_2'?)"));
}

TEST_CASE("sharded_ddp with zero.stage, fsdp or a DeepSpeed config is a conflict naming both", "[unit][spec][hf_args]") {
  const std::string with_stage = write_spec("sharded_stage.yaml", std::string(kSpec) + "  sharded_ddp: zero_dp_2\nzero: {stage: 3}\n");
  std::string err = load_error(with_stage);
  CHECK_THAT(err, Catch::Contains(with_stage + ":5:16: training.sharded_ddp: 'zero_dp_2' and zero.stage (" + with_stage +
                                  ":6:15) both choose how the training state is sharded; give only one"));
  const std::string with_fsdp = write_spec("sharded_fsdp.yaml", std::string(kSpec) + "  sharded_ddp: zero_dp_3\n  fsdp: full_shard\n");
  CHECK_THAT(load_error(with_fsdp), Catch::Contains("training.sharded_ddp: 'zero_dp_3' and training.fsdp (" + with_fsdp +
                                                    ":6:9) are both given") &&
                                        Catch::Contains("together with --fsdp is not possible"));
  const std::string ds = write_spec("sharded_ds.json", R"({"zero_optimization": {"stage": 2}})");
  const std::string with_ds =
      write_spec("sharded_ds.yaml", std::string(kSpec) + "  sharded_ddp: simple\n  deepspeed: " + ds + "\n");
  CHECK_THAT(load_error(with_ds), Catch::Contains("training.sharded_ddp: 'simple' and training.deepspeed (" + with_ds +
                                                  ":6:14) are both given"));
  // The command line wins over the file, in either direction.
  CHECK(load(with_stage, {"training.sharded_ddp=zero_dp_3"}).zero.stage == 3);
  CHECK(load(write_spec("sharded_only.yaml", std::string(kSpec) + "  sharded_ddp: zero_dp_3\n"), {"zero.stage=2"}).zero.stage == 2);
}

TEST_CASE("nulls of training fields are HF's None and neutral values of unbuilt fields are accepted", "[unit][spec][hf_args]") {
  const std::string path = write_spec("neutral.yaml", std::string(kSpec) + R"(  save_total_limit: null
  data_seed: null
  metric_for_best_model: null
  resume_from_checkpoint: null
  neftune_noise_alpha: null
  dataloader_prefetch_factor: null
  eval_steps: null
  optim_args: null
  ddp_backend: null
  per_gpu_train_batch_size: null
  evaluation_strategy: null
  no_cuda: false
  use_cpu: true
  local_rank: 0
  push_to_hub: false
  use_mps_device: false
  torch_compile: false
  debug: []
  hub_token: <HUB_TOKEN>
  accelerator_config: {split_batches: false, dispatch_batches: null, even_batches: true}
  gradient_checkpointing_kwargs: {use_reentrant: false}
  fsdp_config: {min_num_params: 0, xla: false, xla_fsdp_v2: false, xla_fsdp_grad_ckpt: false}
  ddp_timeout: 900
  ddp_bucket_cap_mb: null
)");
  RunSpec spec = load(path);
  CHECK(spec.training.save_total_limit == 0);
  CHECK(spec.training.data_seed == -1);
  CHECK(spec.training.metric_for_best_model.empty());
  CHECK(spec.training.dataloader_prefetch_factor == 2);
  CHECK(spec.training.use_cpu);  // no_cuda: false asks for nothing, so it does not disagree
  CHECK(spec.distributed.ddp_timeout == 900);
  CHECK(spec.distributed.ddp_bucket_cap_mb == 25);
  CHECK(spec.distributed.backend == "auto");
  CHECK(spec.training.per_device_train_batch_size == 8);
  CHECK(load(path, {"training.local_rank=-1"}).training.local_rank == -1);
  CHECK_THAT(load_error(path, {"training.local_rank=2"}), Catch::Contains("training.local_rank: the launcher sets"));
}

TEST_CASE("values of unbuilt fields that ask for something are each refused with their reason", "[unit][spec][hf_args]") {
  const std::string path = write_spec("unbuilt.yaml", std::string(kSpec) + R"(  push_to_hub: true
  hub_model_id: me/model
  torch_compile: true
  debug: underflow_overflow
  accelerator_config: {split_batches: true, even_batches: true, frobnicate: 1}
  fsdp_config: {xla: true}
  dataloader_pin_memory: false
)");
  const std::string err = load_error(path);
  CHECK_THAT(err, Catch::Contains("(7 problems)"));
  CHECK_THAT(err, Catch::Contains(path + ":5:16: training.push_to_hub: 'true' is not available: nothing is uploaded"));
  CHECK_THAT(err, Catch::Contains("training.hub_model_id: 'me/model' is not available: nothing is uploaded"));
  CHECK_THAT(err, Catch::Contains("training.torch_compile: 'true' is not available: torch.compile"));
  CHECK_THAT(err, Catch::Contains("training.debug: 'underflow_overflow' is not available: TPU metrics"));
  CHECK_THAT(err, Catch::Contains("training.accelerator_config.split_batches: 'true' is not available: Accelerate's data dispatch"));
  CHECK_THAT(err, Catch::Contains("training.accelerator_config.frobnicate: not available"));
  CHECK_THAT(err, Catch::Contains("training.fsdp_config.xla: 'xla: true': XLA (TPU) FSDP is not available"));
}

TEST_CASE("HfArgumentParser flags become the overrides they stand for", "[unit][hf_args]") {
  using V = std::vector<std::string>;
  CHECK(rewrite({"spec.yaml", "--learning_rate", "1e-4", "--output_dir", "x"}) ==
        V{"spec.yaml", "--set", "training.learning_rate=1e-4", "--set", "training.output_dir=x"});
  CHECK(rewrite({"spec.yaml", "--learning_rate=1e-4", "--dump-config"}) ==
        V{"spec.yaml", "--dump-config", "--set", "training.learning_rate=1e-4"});
  // Booleans as HF parses them: bare = true, HF's string_to_bool spellings, --no_<flag>.
  CHECK(rewrite({"s", "--do_eval", "--bf16", "true", "--gradient_checkpointing", "no", "--use_cpu=Y", "--no_log_on_each_node"}) ==
        V{"s", "--set", "training.do_eval=true", "--set", "training.bf16=true", "--set", "training.gradient_checkpointing=false",
          "--set", "training.use_cpu=true", "--set", "training.log_on_each_node=false"});
  CHECK(rewrite({"s", "--do_eval", "spec2"}) == V{"s", "spec2", "--set", "training.do_eval=true"});
  // run_clm's model and data flags, and strings taken verbatim.
  CHECK(rewrite({"s", "--model_name_or_path", "models/gpt2", "--train_file", "a b.txt", "--block_size", "128"}) ==
        V{"s", "--set", "model.from_pretrained=models/gpt2", "--set", "data.train_file=a b.txt", "--set", "data.block_size=128"});
  CHECK(rewrite({"s", "--sharded_ddp", "zero_dp_2 offload", "--max_steps", "-1", "--run_name", "*x"}) ==
        V{"s", "--set", "training.sharded_ddp=zero_dp_2 offload", "--set", "training.max_steps=-1", "--set",
          "training.run_name=\"*x\""});
  CHECK(rewrite({"s", "--lr_scheduler_kwargs", "{\"num_cycles\": 2}"}) ==
        V{"s", "--set", "training.lr_scheduler_kwargs={\"num_cycles\": 2}"});
  // Unknown flags: a did-you-mean; hyphenated words are left to the command's own parser.
  CHECK_THAT(config_error([] { rewrite({"s", "--lerning_rate", "1"}); }),
             Catch::Contains("unknown option --lerning_rate (did you mean 'learning_rate'?)"));
  CHECK(rewrite({"s", "--frobnicate"}) == V{"s", "--frobnicate"});
  CHECK_THAT(config_error([] { rewrite({"s", "--learning_rate"}); }), Catch::Contains("--learning_rate: expected a value"));
  CHECK_THAT(config_error([] { rewrite({"s", "--bf16=maybe"}); }), Catch::Contains("'maybe' is not a boolean"));
  CHECK_THAT(config_error([] { rewrite({"s", "--dataset_name", "wikitext"}); }), Catch::Contains("nothing is downloaded"));
}

TEST_CASE("torch.distributed.launch's --local_rank is taken out and checked against the environment", "[unit][hf_args]") {
  using V = std::vector<std::string>;
  for (const V& given : {V{"--local_rank=1", "train", "s"}, V{"--local-rank=1", "train", "s"}, V{"train", "--local_rank", "1", "s"}}) {
    V args = given;
    CHECK(take_local_rank_flag(args) == 1);
    CHECK((args == V{"train", "s"}));
  }
  V none{"train", "s"};
  CHECK_FALSE(take_local_rank_flag(none).has_value());
  V bad{"--local_rank=one"};
  CHECK_THAT(config_error([&] { take_local_rank_flag(bad); }), Catch::Contains("'one' is not a local rank"));

  std::map<std::string, std::string> env;
  const auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  env = {{"LOCAL_RANK", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}};
  CHECK_FALSE(check_local_rank_flag(1, lookup).has_value());
  CHECK_THAT(config_error([&] { check_local_rank_flag(0, lookup); }),
             Catch::Contains("--local_rank=0 (from the launcher's command line) disagrees with LOCAL_RANK=1"));
  env = {{"RANK", "3"}, {"WORLD_SIZE", "4"}};  // the legacy launcher: the flag is the only word on the local rank
  CHECK(check_local_rank_flag(1, lookup) == 1);
  env.clear();
  CHECK_FALSE(check_local_rank_flag(0, lookup).has_value());
  CHECK_FALSE(check_local_rank_flag(-1, lookup).has_value());
  CHECK_THAT(config_error([&] { check_local_rank_flag(2, lookup); }), Catch::Contains("no launcher environment"));
}

TEST_CASE("a value on the command line wins over the file in any spelling", "[unit][spec][hf_args]") {
  const std::string path = write_spec("cli_wins.yaml", std::string(kSpec) + "scheduler: {type: linear}\noptimizer: {type: sgd}\n");
  RunSpec spec = load(path, {"training.lr_scheduler_type=cosine"});
  CHECK(spec.scheduler.type == "cosine");
  CHECK_THAT(spec.origins.at("scheduler.type"),
             Catch::Contains("training.lr_scheduler_type: cosine (--set training.lr_scheduler_type, over 'linear' at " + path + ":5"));
  // The file's HF spelling, the command line's section spelling.
  const std::string hf = write_spec("cli_wins_hf.yaml", std::string(kSpec) + "  lr_scheduler_type: linear\n");
  CHECK(load(hf, {"scheduler.type=cosine"}).scheduler.type == "cosine");
  // Both spellings in the file, or both on the command line, still disagree.
  CHECK_THAT(load_error(path, {"training.lr_scheduler_type=cosine", "scheduler.type=linear"}),
             Catch::Contains("the same setting written twice"));
  // A dotted key without its section gets a did-you-mean.
  CHECK_THAT(load_error(path, {"learning_rate=1e-4"}),
             Catch::Contains("--set learning_rate: learning_rate: unknown section (did you mean 'training.learning_rate'?"));
  CHECK_THAT(load_error(path, {"stage=2"}), Catch::Contains("did you mean 'zero.stage'?"));
  CHECK_THAT(load_error(path, {"model_name_or_path=m"}), Catch::Contains("did you mean 'model.from_pretrained'?"));
}

TEST_CASE("the v4.x docs' ds_config zeros are the legacy spelling of auto", "[unit][spec][hf_args][deepspeed]") {
  const std::string ds = write_spec("legacy_zero.json", R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": 0,
    "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0}})");
  const std::string path = write_spec("legacy_zero.yaml", "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                                                          "data: {type: digit_reversal}\ntraining:\n  output_dir: x\n"
                                                          "  deepspeed: " + ds + "\n");
  RunSpec spec = load(path);
  // HF fills them from hidden_size 16: 16^2, int(0.9 x 16^2), 10 x 16.
  CHECK(spec.distributed.ddp_bucket_cap_mb == Approx(256.0 * 4 / (1024 * 1024)));
  CHECK(spec.zero.stage3_prefetch_bucket_size == 230);
  CHECK(spec.zero.stage3_param_persistence_threshold == 160);
  for (const char* key : {"reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"})
    CHECK(has_note(spec, std::string("DeepSpeed zero_optimization.") + key + ": 0 is the v4.x docs' spelling of \"auto\""));
  // In hftrain's own zero section 0 keeps its meaning (no prefetch).
  CHECK(load(path, {"training.deepspeed=null", "zero.stage=3", "zero.stage3_prefetch_bucket_size=0"}).zero.stage3_prefetch_bucket_size == 0);
}

TEST_CASE("a Hub id as data.tokenizer gets the nothing-is-downloaded hint that model.from_pretrained gives", "[unit][hf_args]") {
  for (const std::string id : {"gpt2", "meta-llama/Llama-3.1-8B"}) {
    INFO(id);
    const std::string tokenizer = config_error([&] { load_tokenizer(id, "data.tokenizer"); });
    CHECK_THAT(tokenizer, Catch::Contains("data.tokenizer: '" + id + "' is not a tokenizer") &&
                              Catch::Contains(nothing_downloaded_hint()));
    const std::string path = write_spec("hub_id.yaml", "model: {from_pretrained: " + id + "}\ndata: {type: digit_reversal}\n"
                                                       "training: {output_dir: x}\n");
    CHECK_THAT(load_error(path), Catch::Contains("model.from_pretrained: '" + id + "' is not a directory (" +
                                                 nothing_downloaded_hint() + ")"));
  }
  // A local path that is missing says so, with the same hint; a missing .json file is just missing.
  CHECK_THAT(config_error([] { load_tokenizer("no/such/tokenizer.json", "data.tokenizer"); }),
             Catch::Contains("does not exist") && !Catch::Contains("nothing is downloaded"));
}

TEST_CASE("run_clm's torch_dtype and attn_implementation flags map onto what hftrain has", "[unit][spec][hf_args]") {
  using V = std::vector<std::string>;
  CHECK(rewrite({"s", "--torch_dtype", "bfloat16", "--attn_implementation=sdpa", "--dtype", "auto"}) ==
        V{"s", "--set", "model.torch_dtype=bfloat16", "--set", "model.attn_implementation=sdpa", "--set", "model.torch_dtype=auto"});
  const std::string path = write_spec("model_args.yaml", kSpec);
  // A 16-bit dtype is the precision that gives the model 16-bit weights (with fp32 masters); float32 is what
  // hftrain loads.
  RunSpec bf16 = load(path, {"model.torch_dtype=bfloat16"});
  CHECK(bf16.precision.bf16);
  CHECK_THAT(bf16.origins.at("precision.bf16"), Catch::Contains("model.torch_dtype: bfloat16 (--set model.torch_dtype"));
  CHECK(has_note(bf16, "model.torch_dtype bfloat16 is precision.bf16 here"));
  RunSpec fp32 = load(path, {"model.torch_dtype=float32", "training.bf16=true"});
  CHECK(fp32.precision.bf16);  // HF's --bf16 autocasts a float32 model: the two agree
  CHECK(has_note(fp32, "model.torch_dtype float32: the weights load in float32"));
  CHECK_THAT(load_error(path, {"model.torch_dtype=bfloat16", "training.bf16=false"}), Catch::Contains("disagrees with"));
  // auto: the dtype model.from_pretrained's config.json names.
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_hf_arguments_" + std::to_string(::getpid())) / "bf16_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16,
    "n_positions": 32, "vocab_size": 256, "torch_dtype": "bfloat16"})";
  const std::string pretrained = write_spec("model_args_auto.yaml", "model: {from_pretrained: " + dir.string() +
                                                                    "}\ndata: {type: digit_reversal}\ntraining: {output_dir: x}\n");
  RunSpec autodtype = load(pretrained, {"model.torch_dtype=auto"});
  CHECK(autodtype.precision.bf16);
  CHECK(has_note(autodtype, "model.torch_dtype auto (" + (dir / "config.json").string() + ": bfloat16) is precision.bf16"));
  CHECK_FALSE(load(path, {"model.torch_dtype=auto"}).precision.bf16);  // no config.json: float32
  CHECK_THAT(load_error(path, {"model.torch_dtype=bfloat6"}),
             Catch::Contains("model.torch_dtype: 'bfloat6' is not a dtype run_clm loads a model in (did you mean 'bfloat16'?)"));
  // Attention: what hftrain's own kernel computes is accepted, anything else refused with the reason.
  for (const std::string name : {"eager", "sdpa", "flash_attention_2"}) {
    RunSpec spec = load(path, {"model.attn_implementation=" + name});
    CHECK(has_note(spec, "model.attn_implementation " + name + ": hftrain's own attention computes the same"));
  }
  CHECK_THAT(load_error(path, {"model.attn_implementation=flex_attention"}),
             Catch::Contains("model.attn_implementation: 'flex_attention' is not built") &&
                 Catch::Contains("score and mask modifications"));
  CHECK_THAT(load_error(path, {"model.attn_implementation=kernels-community/flash-attn"}),
             Catch::Contains("would have to be downloaded"));
}

TEST_CASE("report_to names of HF's trackers say what is built instead", "[unit][spec][hf_args]") {
  const std::string path = write_spec("report_to.yaml", kSpec);
  for (const std::string tracker : {"wandb", "mlflow", "trackio", "comet_ml", "clearml", "neptune"}) {
    INFO(tracker);
    const std::string err = load_error(path, {"training.report_to=[tensorboard, " + tracker + "]"});
    CHECK_THAT(err, Catch::Contains("training.report_to: '" + tracker + "' is not built: hftrain has no " + tracker + " client"));
    CHECK_THAT(err, Catch::Contains("tensorboard (event files in logging_dir") && Catch::Contains("output_dir/logs.jsonl") &&
                        Catch::Contains("trainer_state.json's log_history"));
  }
  CHECK_THAT(load_error(path, {"training.report_to=tensorbord"}), Catch::Contains("(did you mean 'tensorboard'?)"));
  CHECK_FALSE(load(path, {"training.report_to=[]"}).training.report_to.has("jsonl"));  // transformers v5's "none"
}

TEST_CASE("transformers v5: warmup_steps below 1 is a ratio of the total steps", "[unit][spec][hf_args]") {
  const std::string path = write_spec("warmup.yaml", kSpec);
  const RunSpec spec = load(path, {"training.warmup_steps=0.1"});
  CHECK(spec.training.warmup_steps == Approx(0.1));
  CHECK(warmup_steps_for(spec.training.warmup_steps, spec.training.warmup_ratio, 50) == 5);
  CHECK(warmup_steps_for(0.15, 0.0, 50) == 8);   // ceil(7.5), HF v5's get_warmup_steps
  CHECK(warmup_steps_for(0.1, 0.5, 50) == 5);    // given, it wins over v4's warmup_ratio
  CHECK(warmup_steps_for(0, 0.5, 50) == 25);     // v4: warmup_ratio when warmup_steps is 0
  CHECK(warmup_steps_for(12, 0.5, 50) == 12);
  CHECK(warmup_steps_for(1, 0.0, 50) == 1);
  CHECK(load(path, {"training.warmup_steps=7"}).training.warmup_steps == 7);
  CHECK_THAT(load_error(path, {"training.warmup_steps=2.5"}),
             Catch::Contains("training.warmup_steps") && Catch::Contains("must be an integer, or a ratio < 1 of total steps"));
  CHECK_THAT(load_error(path, {"training.warmup_steps=-0.1"}), Catch::Contains("must be >= 0"));
}

TEST_CASE("fields transformers v5 removed are refused naming v5 when set, and v5's new fields load", "[unit][spec][hf_args]") {
  const std::string removed = write_spec("v5_removed.yaml", std::string(kSpec) + R"(  jit_mode_eval: true
  past_index: 2
  fp16_backend: apex
  include_inputs_for_metrics: true
  use_legacy_prediction_loop: true
  push_to_hub_token: secret
)");
  const std::string err = load_error(removed);
  CHECK_THAT(err, Catch::Contains("(6 problems)"));
  for (const char* field : {"jit_mode_eval", "past_index", "fp16_backend", "include_inputs_for_metrics", "use_legacy_prediction_loop"})
    CHECK_THAT(err, Catch::Contains(std::string("training.") + field + ": '") &&
                        Catch::Contains("which ask for nothing; transformers v5 removed this field"));
  CHECK_THAT(err, Catch::Contains("transformers v5 removed this field (v5: include_for_metrics)"));
  CHECK_THAT(err, Catch::Contains("transformers v5 removed this field (v5: hub_token)"));
  // The v4 fields v5 removed that hftrain builds keep working.
  const RunSpec v4 = load(write_spec("v5_kept.yaml", std::string(kSpec) + R"(  overwrite_output_dir: true
  logging_dir: tb
  include_tokens_per_second: false
  warmup_ratio: 0.2
  per_gpu_train_batch_size: 4
  no_cuda: true
)"));
  CHECK(v4.training.overwrite_output_dir);
  CHECK(v4.training.logging_dir == "tb");
  CHECK_FALSE(v4.training.include_tokens_per_second);
  CHECK(v4.training.warmup_ratio == Approx(0.2));
  CHECK(v4.training.per_device_train_batch_size == 4);
  CHECK(v4.training.use_cpu);
  // v5's new fields and defaults.
  const std::string added = write_spec("v5_added.yaml", std::string(kSpec) + R"(  project: huggingface
  trackio_space_id: trackio
  use_cache: false
  enable_jit_checkpoint: false
  parallelism_config: null
  train_sampling_strategy: group_by_length
  include_num_input_tokens_seen: non_padding
  optim: adamw_torch_fused
  report_to: []
  warmup_ratio: null
  logging_dir: null
  average_tokens_across_devices: true
)");
  const RunSpec v5 = load(added);
  CHECK(v5.training.group_by_length);
  CHECK(v5.training.include_num_input_tokens_seen.mode == InputTokensSeen::Mode::kNonPadding);
  CHECK(v5.optimizer.type == "adamw");
  CHECK(v5.training.warmup_ratio == 0);
  CHECK(v5.training.logging_dir.empty());
  CHECK_FALSE(load(added, {"training.train_sampling_strategy=random"}).training.group_by_length);
  CHECK_THAT(load_error(added, {"training.train_sampling_strategy=sequential"}),
             Catch::Contains("training.train_sampling_strategy: 'sequential' is not available"));
  CHECK_THAT(load_error(added, {"training.parallelism_config={tp_size: 2}"}),
             Catch::Contains("training.parallelism_config.tp_size") && Catch::Contains("tensor parallelism is not available"));
  CHECK_THAT(load_error(added, {"training.project=mine"}), Catch::Contains("report_to has no trackio here"));
}
