// The typed sections of a run spec. Names and defaults follow HF TrainingArguments and DeepSpeed's
// config where those define them. Each section declares its options once (declare()), with help text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/schema.h"

namespace hftrain {

// report_to: where log events go besides trainer_state.json: "jsonl", "tensorboard", "all" (both,
// the default) or "none". Written as one name or a list, as HF accepts both.
struct ReportTargets {
  std::vector<std::string> names{"all"};
  bool has(const std::string& target) const;  // after "all" / "none" are taken into account
};

template <>
struct ValueTraits<ReportTargets> {
  static std::string name() { return "report target or list of them"; }
  static bool parse(const YAML::Node& n, ReportTargets& out) {
    if (n.IsScalar()) {
      out.names = {n.Scalar()};
      return true;
    }
    return ValueTraits<std::vector<std::string>>::parse(n, out.names);
  }
  static YAML::Node dump(const ReportTargets& v) { return ValueTraits<std::vector<std::string>>::dump(v.names); }
};

// optim_target_modules (HF TrainingArguments): one string, which HF takes as a regular expression the whole
// module name must match, or a list of strings (exact module names, substrings or regular expressions
// matched at the start; see optim/target_modules.h). Empty: none given.
struct TargetModules {
  bool single = false;  // written as one string
  std::vector<std::string> patterns;
  bool given() const { return !patterns.empty(); }
};

template <>
struct ValueTraits<TargetModules> {
  static std::string name() { return "module name pattern or list of them"; }
  static bool parse(const YAML::Node& n, TargetModules& out) {
    if (n.IsNull()) {
      out = TargetModules{};
      return true;
    }
    if (n.IsScalar()) {
      out.single = true;
      out.patterns = {n.Scalar()};
      return true;
    }
    out.single = false;
    return ValueTraits<std::vector<std::string>>::parse(n, out.patterns);
  }
  static YAML::Node dump(const TargetModules& v) {
    if (!v.given()) return YAML::Node(YAML::NodeType::Null);
    if (v.single) return YAML::Node(v.patterns.front());
    return ValueTraits<std::vector<std::string>>::dump(v.patterns);
  }
};

// distributed.nproc_per_node: a number of workers, or `auto` (one per visible GPU, 1 on the CPU; resolved
// at launch by dist/devices.h choose_worker_count).
struct WorkerCount {
  int64_t count = 1;       // when !automatic
  bool automatic = false;
};

template <>
struct ValueTraits<WorkerCount> {
  static std::string name() { return "integer or auto"; }
  static bool parse(const YAML::Node& n, WorkerCount& out) {
    if (n.IsScalar() && n.Scalar() == "auto") {
      out = WorkerCount{1, true};
      return true;
    }
    out.automatic = false;
    return ValueTraits<int64_t>::parse(n, out.count);
  }
  static YAML::Node dump(const WorkerCount& v) { return v.automatic ? YAML::Node("auto") : YAML::Node(v.count); }
};

// include_num_input_tokens_seen (HF): "no", "all" (input_ids elements, padding included) or "non_padding"
// (attention-mask ones); true and false read as "all" and "no", as HF maps them.
struct InputTokensSeen {
  enum class Mode { kNo, kAll, kNonPadding } mode = Mode::kNo;
  bool on() const { return mode != Mode::kNo; }
};

template <>
struct ValueTraits<InputTokensSeen> {
  static std::string name() { return "no, all, non_padding or a boolean"; }
  static bool parse(const YAML::Node& n, InputTokensSeen& out) {
    if (!n.IsScalar()) return false;
    const std::string& v = n.Scalar();
    using Mode = InputTokensSeen::Mode;
    bool flag = false;
    if (v == "no") out.mode = Mode::kNo;
    else if (v == "all") out.mode = Mode::kAll;
    else if (v == "non_padding") out.mode = Mode::kNonPadding;
    else if (ValueTraits<bool>::parse(n, flag)) out.mode = flag ? Mode::kAll : Mode::kNo;
    else return false;
    return true;
  }
  static YAML::Node dump(const InputTokensSeen& v) {
    using Mode = InputTokensSeen::Mode;
    return YAML::Node(v.mode == Mode::kAll ? "all" : v.mode == Mode::kNonPadding ? "non_padding" : "no");
  }
};

// HF TrainingArguments subset (names and defaults as in transformers).
struct TrainingArgs {
  std::string output_dir;
  bool overwrite_output_dir = false;
  std::string resume_from_checkpoint;  // "" = no; a path, or "true"/"last" for the newest complete checkpoint
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  TargetModules optim_target_modules;  // the weights GaLore projects
  double warmup_steps = 0;  // >= 1: steps (an integer); below 1: a ratio of the total steps (transformers v5)
  double warmup_ratio = 0.0;
  std::string logging_strategy = "steps";
  double logging_steps = 500;
  bool logging_first_step = false;
  bool logging_nan_inf_filter = true;
  std::string eval_strategy = "no";
  double eval_steps = 0;  // 0 = same as logging_steps (HF: None)
  double eval_delay = 0;
  bool do_eval = true;
  std::string save_strategy = "steps";
  double save_steps = 500;
  int64_t save_total_limit = 0;  // 0 = keep all (HF: None)
  bool save_only_model = false;   // checkpoints hold only the model (not resumable)
  bool ignore_data_skip = false;  // on resume, start the interrupted epoch from its first batch
  bool ignore_optimizer_state = false;  // on resume, weights and schedule only (fresh optimizer moments)
  bool resume_over_newer_model = false;  // let a resume end below the step of output_dir's model and replace it
  bool load_best_model_at_end = false;
  std::string metric_for_best_model;          // "" = "loss" (HF: None)
  std::optional<bool> greater_is_better;      // null = not metric.endswith("loss") (HF default)
  int64_t seed = 42;
  int64_t data_seed = -1;  // -1 = use seed (HF: None)
  bool dataloader_drop_last = false;
  int64_t dataloader_num_workers = 1;
  int64_t dataloader_prefetch_factor = 2;
  bool dataloader_pin_memory = true;  // a GPU worker pins batches and copies them without blocking (data/batch_placement)
  bool group_by_length = false;              // HF LengthGroupedSampler for the training set
  bool padding_free = false;                 // TRL padding_free / HF DataCollatorWithFlattening (data/packing.h)
  std::string length_column_name = "length";
  double label_smoothing_factor = 0.0;
  bool chunked_lm_loss = true;        // language models' training loss without the logits tensor (models/lm_loss.h)
  int64_t lm_loss_chunk_tokens = 0;   // tokens per chunk of that loss; 0 = auto
  bool average_tokens_across_devices = true;  // HF >= 4.46 token-exact loss: the label-token count of a step over all workers
  bool eval_on_start = false;
  bool restore_callback_states_from_checkpoint = false;
  bool gradient_checkpointing = false;
  bool gradient_checkpointing_offload = false;  // checkpointed block inputs kept in host memory (models/checkpointing.h)
  bool tiled_mlp = false;
  int64_t tiled_mlp_tiles = 0;  // 0 = auto
  double neftune_noise_alpha = 0.0;  // 0 = off (HF: None)
  bool prediction_loss_only = false;
  // Seq2SeqTrainingArguments
  bool predict_with_generate = false;           // evaluation generates; text metrics score the decoded output
  std::optional<int64_t> generation_max_length;  // fills generation.max_length when the spec leaves it out
  std::optional<int64_t> generation_num_beams;   // fills generation.num_beams likewise
  std::string generation_config;                 // generation_config.json (or its directory); "" = the model's
  bool sortish_sampler = false;
  InputTokensSeen include_num_input_tokens_seen;
  bool disable_tqdm = false;
  std::string log_level = "info";
  std::string log_level_replica = "warning";
  bool log_on_each_node = true;
  std::string logging_dir;  // "" = output_dir/runs/<Mon DD_HH-MM-SS>_<host> (HF default)
  ReportTargets report_to;
  bool skip_memory_metrics = false;       // HF default: true (its sampler busy-loops; ours sleeps 1 ms)
  bool include_tokens_per_second = true;  // HF default: false (it costs HF a pass over the data; here it is free)
  bool bf16_full_eval = false;  // evaluate with the model itself in bfloat16
  bool fp16_full_eval = false;  // evaluate with the model itself in float16 (CUDA only)
  std::string run_name;         // "" = output_dir (HF default)
  bool use_cpu = false;         // the CPU even where GPUs are visible (dist/devices.h)
  std::optional<bool> tf32;     // true needs an Ampere GPU: refused on this build
  bool save_safetensors = true;  // false (pickle .bin files) refused
  bool save_on_each_node = false;  // true refused: rank 0 writes into one shared output_dir
  bool full_determinism = false;   // torch's deterministic algorithms switched on
  std::optional<int64_t> eval_accumulation_steps;  // accepted with a note: predictions are in host memory already
  std::optional<bool> ddp_find_unused_parameters;  // true refused: every trainable parameter gets a gradient
  int64_t local_rank = -1;  // set by the launcher (LOCAL_RANK); another value refused

  static void declare(Schema<TrainingArgs>& s);
};

// Process layout (docs/distributed.md; devices and `auto`: dist/devices.h).
struct DistributedArgs {
  WorkerCount nproc_per_node;
  std::string backend = "auto";
  int64_t ddp_timeout = 1800;
  int64_t rendezvous_timeout = 600;  // seconds every worker waits for the others to join (docs/distributed.md)
  double ddp_bucket_cap_mb = 25;
  int64_t max_restarts = 0;
  int64_t intra_op_threads = 0;  // 0 = automatic (see README "Threads and BLAS")
  // Ulysses sequence parallelism: ranks per group sharing each sequence (docs/distributed.md); 1 = none
  int64_t sequence_parallel_size = 1;
  // Expert parallelism: ranks per group sharing the routed experts of an MoE model (docs/distributed.md); 1 = none
  int64_t expert_parallel_size = 1;

  static void declare(Schema<DistributedArgs>& s);
};

// zero_optimization.offload_optimizer (DeepSpeed's names and defaults).
struct OffloadOptimizerArgs {
  std::string device = "none";  // none | cpu | nvme
  std::string nvme_path;        // nvme: the directory that holds the swap files
  int64_t buffer_count = 4;     // nvme: aligned buffers the optimizer step streams the state through

  static void declare(Schema<OffloadOptimizerArgs>& s);
};

// DeepSpeed's `aio` section: how the NVMe swap files are read and written.
struct AioArgs {
  int64_t block_size = 1048576;
  int64_t queue_depth = 8;
  bool overlap_events = true;

  static void declare(Schema<AioArgs>& s);
};

// DeepSpeed zero_optimization subset.
struct ZeroArgs {
  int64_t stage = 0;
  OffloadOptimizerArgs offload_optimizer;
  AioArgs aio;
  int64_t sub_group_size = 1000000000;  // elements the nvme-offloaded optimizer swaps and steps at a time
  std::string offload_param = "none";
  std::string reduce_dtype = "auto";  // DeepSpeed communication_data_type: auto = the parameters' dtype, or fp32
  int64_t stage3_param_persistence_threshold = 100000;
  int64_t stage3_prefetch_bucket_size = 50000000;
  int64_t stage3_max_live_parameters = 1000000000;
  bool stage3_gather_16bit_weights_on_model_save = true;
  bool zero3_init_flag = true;

  static void declare(Schema<ZeroArgs>& s);
};

// Mixed precision (HF bf16 / fp16 flags and DeepSpeed's fp16 loss-scaler block).
struct PrecisionArgs {
  bool bf16 = false;
  bool fp16 = false;
  double loss_scale = 0;  // 0 = dynamic
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
  std::string save_dtype = "fp32";  // dtype of the saved model.safetensors

  static void declare(Schema<PrecisionArgs>& s);
};

// HF example scripts' DataTrainingArguments max_train_samples / max_eval_samples / max_predict_samples:
// keys of the `data` section beside the data source's own options, valid for every data type. Each
// keeps the first N examples of its split (after tokenization and packing); null = all of them.
// max_predict_samples also bounds the prompts of `hftrain predict --prompts`.
struct DataSampleLimits {
  std::optional<int64_t> max_train_samples;
  std::optional<int64_t> max_eval_samples;
  std::optional<int64_t> max_predict_samples;
  static void declare(Schema<DataSampleLimits>& s);
};

// Options of `hftrain predict` for language models.
struct GenerationArgs {
  std::optional<int64_t> max_new_tokens;  // null = from max_length, or 16 when that is null too
  std::optional<int64_t> max_length;      // HF max_length (prompt or decoder start + generated)
  std::optional<int64_t> min_length;
  bool do_sample = false;                // false = greedy
  double temperature = 1.0;
  int64_t top_k = 50;                    // 0 = off (HF default 50, used only when sampling)
  double top_p = 1.0;                    // 1 = off
  std::optional<int64_t> seed;           // null = training.seed
  std::optional<int64_t> eos_token_id;   // null = the tokenizer's eos token, if it has one
  int64_t min_new_tokens = 0;
  int64_t no_repeat_ngram_size = 0;      // 0 = off
  int64_t num_beams = 1;                 // 1 = greedy / sampling; > 1 = beam search
  double length_penalty = 1.0;
  std::string early_stopping = "false";  // HF's early_stopping: true, false or "never"
  int64_t num_return_sequences = 1;
  std::optional<int64_t> forced_bos_token_id;
  std::optional<int64_t> forced_eos_token_id;

  static void declare(Schema<GenerationArgs>& s);
};

// How the generation section was resolved (spec/generation_sources): what the spec set itself and what a
// generation_config.json said that the generation settings cannot carry.
struct GenerationSourceFacts {
  // Keys the spec's own generation section (or --set, or a flag) set. The saved run_spec.yaml keeps only
  // these, so that loading it again fills the rest from their sources, as the first load did.
  std::vector<std::string> given_keys;
  // Keys the spec wrote as null: no source fills them (an eos_token_id of a generation_config.json is cleared
  // this way; it then falls back to the tokenizer's). The saved run_spec.yaml writes them as null again.
  std::vector<std::string> cleared_keys;
  // Settings of a generation_config.json that hftrain's generation cannot honour ("file: key: why"):
  // loading warns, generating refuses to start.
  std::vector<std::string> unsupported;
  // A generation_config.json's decoder_start_token_id (HF's generate() prefers it to the model's):
  // generating with a model whose own differs is refused.
  std::optional<int64_t> decoder_start_token_id;
  std::string decoder_start_source;  // the file that said it
};

}  // namespace hftrain
