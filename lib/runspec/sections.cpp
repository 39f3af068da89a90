// Option declarations (name, member, help, constraints) for the fixed run-spec sections.
#include "runspec/sections.h"

#include <algorithm>

namespace hftrain {
namespace {

std::string steps_rule(const double& v) {
  if (v < 0) return "must be >= 0";
  if (v > 1 && v != static_cast<double>(static_cast<int64_t>(v))) return "must be an integer, or a ratio < 1 of total steps";
  return "";
}

const std::vector<std::string> kIntervalStrategies = {"no", "steps", "epoch"};
const std::vector<std::string> kLogLevels = {"debug", "info", "warning", "error", "critical", "passive"};
const std::vector<std::string> kReportTargets = {"all", "none", "jsonl", "tensorboard"};
// HF's other report_to integrations: experiment trackers that hftrain has no client for.
const std::vector<std::string> kHfTrackers = {"azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive",
                                              "flyte",    "mlflow",  "neptune",    "swanlab",  "trackio", "wandb"};

std::string report_to_rule(const ReportTargets& v) {
  for (const auto& name : v.names) {
    bool known = false;
    for (const auto& t : kReportTargets) known = known || t == name;
    if (!known && std::find(kHfTrackers.begin(), kHfTrackers.end(), name) != kHfTrackers.end())
      return "'" + name + "' is not built: hftrain has no " + name + " client and sends nothing over the network. What is "
             "built: tensorboard (event files in logging_dir: `tensorboard --logdir`, or import them into a tracker that "
             "reads them, e.g. `wandb sync LOGDIR`) and jsonl (output_dir/logs.jsonl, one JSON object per log: the entries of "
             "trainer_state.json's log_history, the values HF hands its trackers). For the same curves give tensorboard, "
             "jsonl or all, and load those files into " + name;
    if (!known) return "'" + name + "' is not one of: all, none, jsonl, tensorboard" + did_you_mean(name, kReportTargets);
    if ((name == "all" || name == "none") && v.names.size() > 1) return "'" + name + "' must be given alone";
  }
  return "";
}

// Where the run writes and what it resumes from.
void declare_output(Schema<TrainingArgs>& s) {
  s.add("output_dir", &TrainingArgs::output_dir, "Directory for checkpoints, the final model and results.").required();
  s.add("overwrite_output_dir", &TrainingArgs::overwrite_output_dir, "Allow writing into a non-empty output_dir.");
  s.add("resume_from_checkpoint", &TrainingArgs::resume_from_checkpoint,
        "Checkpoint directory to resume from, or 'last' / 'true' for the newest complete one in output_dir.");
}

// Batch sizes, accumulation and how long training runs.
void declare_batches_and_length(Schema<TrainingArgs>& s) {
  s.add("per_device_train_batch_size", &TrainingArgs::per_device_train_batch_size, "Training batch size per worker.").min(1);
  s.add("per_device_eval_batch_size", &TrainingArgs::per_device_eval_batch_size, "Evaluation batch size per worker.").min(1);
  s.add("gradient_accumulation_steps", &TrainingArgs::gradient_accumulation_steps,
        "Micro-batches accumulated before each optimizer step.").min(1);
  s.add("num_train_epochs", &TrainingArgs::num_train_epochs, "Number of epochs (may be fractional).").greater_than(0);
  s.add("max_steps", &TrainingArgs::max_steps, "If > 0: total optimizer steps, overriding num_train_epochs.").min(-1);
}

// The optimizer's and schedule's settings that HF keeps in TrainingArguments.
void declare_optimization(Schema<TrainingArgs>& s) {
  s.add("learning_rate", &TrainingArgs::learning_rate, "Initial (peak) learning rate.").min(0);
  s.add("weight_decay", &TrainingArgs::weight_decay, "Decoupled weight decay, not applied to biases and norms.").min(0);
  s.add("adam_beta1", &TrainingArgs::adam_beta1, "Adam beta1.").min(0).max(1);
  s.add("adam_beta2", &TrainingArgs::adam_beta2, "Adam beta2.").min(0).max(1);
  s.add("adam_epsilon", &TrainingArgs::adam_epsilon, "Adam epsilon.").greater_than(0);
  s.add("optim_target_modules", &TrainingArgs::optim_target_modules,
        "Modules whose weights GaLore updates in low rank (galore_* optimizers only): one regular expression the "
        "whole module name must match, or a list of exact names, substrings or start-anchored regular expressions "
        "(HF's rules); only Linear modules count, and a pattern that selects none is an error.");
  s.add("max_grad_norm", &TrainingArgs::max_grad_norm, "Global gradient-norm clipping threshold (0 = off).").min(0);
  s.add("warmup_steps", &TrainingArgs::warmup_steps,
        "Linear warmup steps; a number below 1 is a ratio of the total steps (transformers v5, which has no "
        "warmup_ratio); overrides warmup_ratio when > 0.")
      .check(steps_rule);
  s.add("warmup_ratio", &TrainingArgs::warmup_ratio, "Warmup as a fraction of total steps.").min(0).max(1);
}

// When the trainer logs.
void declare_logging_schedule(Schema<TrainingArgs>& s) {
  s.add("logging_strategy", &TrainingArgs::logging_strategy, "When to log: no, steps or epoch.").choices(kIntervalStrategies);
  s.add("logging_steps", &TrainingArgs::logging_steps, "Log every N steps (integer) or every ratio of total steps (< 1).")
      .check(steps_rule);
  s.add("logging_first_step", &TrainingArgs::logging_first_step, "Also log after the first optimizer step.");
  s.add("logging_nan_inf_filter", &TrainingArgs::logging_nan_inf_filter,
        "Replace nan/inf micro-batch losses by the running mean when logging.");
}

// When the trainer evaluates.
void declare_evaluation_schedule(Schema<TrainingArgs>& s) {
  s.add("eval_strategy", &TrainingArgs::eval_strategy, "When to evaluate: no, steps or epoch.").choices(kIntervalStrategies);
  s.add("eval_steps", &TrainingArgs::eval_steps, "Evaluate every N steps or ratio (< 1); 0 = logging_steps.").check(steps_rule);
  s.add("eval_delay", &TrainingArgs::eval_delay, "Steps (or epochs) to wait before the first evaluation.").min(0);
  s.add("do_eval", &TrainingArgs::do_eval,
        "`hftrain train` evaluates the final model on the eval split (as HF example scripts with --do_eval); "
        "false skips it. Default true.");
}

// When checkpoints are saved and what they hold.
void declare_saving(Schema<TrainingArgs>& s) {
  s.add("save_strategy", &TrainingArgs::save_strategy, "When to save a checkpoint: no, steps, epoch or best.")
      .choices({"no", "steps", "epoch", "best"});
  s.add("save_steps", &TrainingArgs::save_steps, "Save every N steps or ratio (< 1).").check(steps_rule);
  s.add("save_total_limit", &TrainingArgs::save_total_limit, "Keep at most N checkpoints (0 = keep all).").min(0);
  s.add("save_only_model", &TrainingArgs::save_only_model,
        "Checkpoints hold only the model weights and trainer_state.json (no optimizer, scheduler or RNG state: "
        "training cannot resume from them).");
}

// What a resumed run takes from its checkpoint.
void declare_resume(Schema<TrainingArgs>& s) {
  s.add("ignore_data_skip", &TrainingArgs::ignore_data_skip,
        "On resume, do not skip the batches the interrupted epoch already consumed (start it from its first batch).");
  s.add("ignore_optimizer_state", &TrainingArgs::ignore_optimizer_state,
        "On resume, take the checkpoint's weights, schedule, RNG and data position but not its optimizer state "
        "(moments start at zero, with a warning): for a checkpoint of another optimizer or parameter set "
        "(DeepSpeed's load_checkpoint(load_optimizer_states=False)).");
  s.add("resume_over_newer_model", &TrainingArgs::resume_over_newer_model,
        "Let a resume whose run ends below the step of the model already in output_dir (its trainer_state.json) "
        "replace that model; without it such a resume is refused before anything is written.");
}

// Which checkpoint is best.
void declare_best_model(Schema<TrainingArgs>& s) {
  s.add("load_best_model_at_end", &TrainingArgs::load_best_model_at_end,
        "Load the best checkpoint (by metric_for_best_model) when training ends.");
  s.add("metric_for_best_model", &TrainingArgs::metric_for_best_model,
        "Metric that ranks checkpoints and drives early stopping; default 'loss'.");
  s.add("greater_is_better", &TrainingArgs::greater_is_better,
        "Whether a larger metric_for_best_model is better; default: false for names ending in 'loss'.");
}

// Seeds, the data loader and the order and shape of training batches.
void declare_data_order(Schema<TrainingArgs>& s) {
  s.add("seed", &TrainingArgs::seed, "Random seed for initialisation, dropout and shuffling.").min(0);
  s.add("data_seed", &TrainingArgs::data_seed, "Seed for data shuffling; -1 = use seed.").min(-1);
  s.add("dataloader_drop_last", &TrainingArgs::dataloader_drop_last, "Drop the last incomplete training batch.");
  s.add("dataloader_num_workers", &TrainingArgs::dataloader_num_workers,
        "Background threads preparing training batches: 0 = in the training loop, 1 = one thread (default; C++ "
        "collation needs no more, so values above 1 are refused).")
      .min(0)
      .max(1);
  s.add("dataloader_pin_memory", &TrainingArgs::dataloader_pin_memory,
        "A GPU worker pins each batch in host memory and copies it to the device without blocking (HF's default); "
        "false = pageable memory and blocking copies. No effect on the CPU.");
  s.add("dataloader_prefetch_factor", &TrainingArgs::dataloader_prefetch_factor,
        "Batches the background thread prepares ahead (with dataloader_num_workers 1); when steps are "
        "shorter than 1 ms, as many as cover 2 ms of steps (at most 32), so a late worker wake-up never stalls the step.")
      .min(1);
  s.add("group_by_length", &TrainingArgs::group_by_length,
        "Group training examples of similar length into batches (HF LengthGroupedSampler: megabatches of 50 x "
        "batch x gradient_accumulation_steps, sorted by length, longest first).");
  s.add("padding_free", &TrainingArgs::padding_free,
        "Training micro-batches without padding (TRL's padding_free, HF DataCollatorWithFlattening): the "
        "examples of a micro-batch are concatenated into one row, positions restart at each example and "
        "attention stays inside it, so no compute goes to padding; the same loss and gradients as the padded "
        "batch. Causal LMs (gpt, gpt2, llama) and sequence-to-sequence pairs (t5, bart: sources and targets "
        "packed side by side, each target attending to its own source); evaluation batches stay padded.");
  s.add("length_column_name", &TrainingArgs::length_column_name,
        "group_by_length: the dataset column with precomputed lengths; token counts when the dataset has none.");
}

// How a step's loss is normalised, the evaluation before training and callback state on resume.
void declare_step_accounting(Schema<TrainingArgs>& s) {
  s.add("average_tokens_across_devices", &TrainingArgs::average_tokens_across_devices,
        "Label-token losses (causal, seq2seq, masked LM) of an optimizer step are summed over its micro-batches "
        "and divided by the step's label-token count summed over every worker (HF >= 4.46 num_items_in_batch, "
        "its current default); false = each worker's own count (the update then depends on how tokens fall "
        "on workers).");
  s.add("eval_on_start", &TrainingArgs::eval_on_start,
        "Evaluate once before the first training step (a sanity check of the evaluation; it does not step a "
        "metric-driven schedule).");
  s.add("restore_callback_states_from_checkpoint", &TrainingArgs::restore_callback_states_from_checkpoint,
        "On resume, restore the stateful callbacks (early_stopping's patience counter) from the checkpoint's "
        "trainer_state.json stateful_callbacks; false (HF's default) starts them afresh.");
}

// The training loss (smoothing, chunked LM loss) and memory / noise settings of the forward.
void declare_loss_and_memory(Schema<TrainingArgs>& s) {
  s.add("label_smoothing_factor", &TrainingArgs::label_smoothing_factor,
        "Label smoothing epsilon (HF LabelSmoother; -100 labels ignored, causal LMs shifted).").min(0).max(1);
  s.add("chunked_lm_loss", &TrainingArgs::chunked_lm_loss,
        "Language models (gpt, gpt2, llama, t5, bart, bert_mlm) compute the training loss fused with the output "
        "layer, chunk by chunk over the label tokens, and never hold the [tokens x vocabulary] logits (the idea "
        "of Liger's fused linear cross-entropy); same loss and gradients within fp32 rounding. false = full "
        "logits, then the cross-entropy. Evaluation always computes the logits (metrics read them).");
  s.add("lm_loss_chunk_tokens", &TrainingArgs::lm_loss_chunk_tokens,
        "chunked_lm_loss: label tokens per chunk; 0 = auto (a chunk's logits about the size of the step's "
        "hidden states).").min(0);
  s.add("gradient_checkpointing", &TrainingArgs::gradient_checkpointing,
        "Recompute each block in backward: same gradients, lower peak memory.");
  s.add("gradient_checkpointing_offload", &TrainingArgs::gradient_checkpointing_offload,
        "gradient_checkpointing: keep each block's checkpointed input in host memory (pinned on a GPU) until its "
        "recomputation; HF gradient_checkpointing_kwargs {offload: true}, DeepSpeed's cpu_checkpointing.");
  s.add("tiled_mlp", &TrainingArgs::tiled_mlp,
        "ALST's tiled MLP (llama-like decoders): each layer's MLP runs over slices of the sequence, each recomputed in "
        "backward, so its [tokens x intermediate] activations exist one slice at a time; same loss and gradients.");
  s.add("tiled_mlp_tiles", &TrainingArgs::tiled_mlp_tiles,
        "tiled_mlp: slices per sequence; 0 = auto (DeepSpeed's ceil(sequence length / hidden size)).").min(0);
  s.add("neftune_noise_alpha", &TrainingArgs::neftune_noise_alpha,
        "NEFTune noise on input embeddings while training; 0 = off.").min(0);
}

// Evaluation's outputs and Seq2SeqTrainingArguments' generation.
void declare_prediction(Schema<TrainingArgs>& s) {
  s.add("prediction_loss_only", &TrainingArgs::prediction_loss_only, "Evaluation reports only the loss, no metrics.");
  s.add("predict_with_generate", &TrainingArgs::predict_with_generate,
        "Seq2SeqTrainingArguments: evaluation also generates for every example (the `generation` settings) and "
        "text metrics (rouge, bleu, exact_match) score the decoded output; eval_gen_len is the mean generated "
        "length.");
  s.add("generation_max_length", &TrainingArgs::generation_max_length,
        "Seq2SeqTrainingArguments: generation.max_length where the spec does not set it; null = leave it.")
      .min(1);
  s.add("generation_num_beams", &TrainingArgs::generation_num_beams,
        "Seq2SeqTrainingArguments: generation.num_beams where the spec does not set it; null = leave it.")
      .min(1);
  s.add("generation_config", &TrainingArgs::generation_config,
        "Seq2SeqTrainingArguments: an HF generation_config.json (or a directory holding one) whose settings "
        "fill the generation section where the spec does not set them; \"\" = model.from_pretrained's "
        "generation_config.json when there is one.").path();
  s.add("sortish_sampler", &TrainingArgs::sortish_sampler,
        "Seq2SeqTrainingArguments: the training order sorts chunks of 50 batches of shuffled examples by "
        "source length, longest chunk first, the other batches shuffled (less padding).");
}

// What is logged and where log events go.
void declare_reporting(Schema<TrainingArgs>& s) {
  s.add("include_num_input_tokens_seen", &TrainingArgs::include_num_input_tokens_seen,
        "Track num_input_tokens_seen in the state and logs, summed over all workers: all (input_ids elements, "
        "padding included), non_padding (attention-mask ones) or no; true / false = all / no (HF).");
  s.add("disable_tqdm", &TrainingArgs::disable_tqdm, "Disable the progress bar.");
  s.add("log_level", &TrainingArgs::log_level, "Logging level of the main process ('passive' = info).")
      .choices(kLogLevels);
  s.add("log_level_replica", &TrainingArgs::log_level_replica, "Logging level of the other processes.")
      .choices(kLogLevels);
  s.add("log_on_each_node", &TrainingArgs::log_on_each_node,
        "Log at log_level on local rank 0 of every node (else only on global rank 0).");
  s.add("logging_dir", &TrainingArgs::logging_dir,
        "TensorBoard directory; default output_dir/runs/<date-time>_<host>.");
  s.add("report_to", &TrainingArgs::report_to,
        "Where log events go besides trainer_state.json: jsonl (output_dir/logs.jsonl), tensorboard "
        "(event files in logging_dir), all, or none.")
      .check(report_to_rule);
  s.add("skip_memory_metrics", &TrainingArgs::skip_memory_metrics,
        "Do not add the *_mem_cpu_alloc_delta / *_mem_cpu_peaked_delta metrics (process RSS).");
  s.add("include_tokens_per_second", &TrainingArgs::include_tokens_per_second,
        "Add train_tokens_per_second (input tokens, padding included) for token inputs.");
}

// Evaluation precision, the run's name and the device.
void declare_eval_precision_and_device(Schema<TrainingArgs>& s) {
  s.add("bf16_full_eval", &TrainingArgs::bf16_full_eval,
        "Evaluate and predict with the model itself in bfloat16 (no fp32 weights): faster, less memory, "
        "slightly different metrics. Without it, a bf16 run evaluates its bf16 weights under autocast and "
        "`hftrain eval` with precision.bf16 keeps fp32 weights and runs matmuls in bf16.");
  s.add("fp16_full_eval", &TrainingArgs::fp16_full_eval, "As bf16_full_eval, in float16 (needs a CUDA device).");
  s.add("run_name", &TrainingArgs::run_name, "A name for the run, logged at start (HF uses it for experiment trackers; default output_dir).");
  s.add("use_cpu", &TrainingArgs::use_cpu,
        "Train on the CPU even where GPUs are visible (HF); a LibTorch without CUDA always does.");
  s.add("tf32", &TrainingArgs::tf32,
        "TF32 matmuls and convolutions on Ampere or newer NVIDIA GPUs (HF; null = LibTorch's default); true is "
        "refused where the worker computes on the CPU.");
}

// HF settings accepted only at the values hftrain acts on, or with no effect here.
void declare_hf_compatibility(Schema<TrainingArgs>& s) {
  s.add("save_safetensors", &TrainingArgs::save_safetensors,
        "Save model weights as safetensors (HF default true; hftrain writes nothing else).")
      .check([](const bool& v) {
        return v ? "" : "hftrain writes safetensors only (HF's false means pickle .bin files, which can run code on load)";
      });
  s.add("save_on_each_node", &TrainingArgs::save_on_each_node,
        "HF: every node saves its own copy. hftrain's rank 0 writes into output_dir, which must be shared by the nodes.")
      .check([](const bool& v) {
        return v ? "not available: only rank 0 writes checkpoints and the model; give the nodes a shared output_dir" : "";
      });
  s.add("full_determinism", &TrainingArgs::full_determinism,
        "Switch torch's deterministic algorithms on (HF enable_full_determinism); CPU runs are already reproducible.");
  s.add("eval_accumulation_steps", &TrainingArgs::eval_accumulation_steps,
        "HF: move predictions off the accelerator every N steps. They are in host memory already here (no effect).")
      .check([](const std::optional<int64_t>& v) { return v && *v < 1 ? "must be >= 1 or null" : ""; });
  s.add("ddp_find_unused_parameters", &TrainingArgs::ddp_find_unused_parameters,
        "HF / DDP: tolerate parameters without a gradient. Every trainable parameter of hftrain's models gets one.")
      .check([](const std::optional<bool>& v) {
        return v.value_or(false) ? "not available: the data-parallel engine expects a gradient for every trainable parameter "
                                   "in each backward (all hftrain model families give one); remove it or set false"
                                 : "";
      });
  s.add("local_rank", &TrainingArgs::local_rank,
        "Set by the launcher (LOCAL_RANK, torchrun; --local_rank from torch.distributed.launch); in a spec -1 (HF's "
        "default) or 0 (what a TrainingArguments dump of one process holds).")
      .check([](const int64_t& v) {
        return v == -1 || v == 0 ? ""
                                 : "the launcher sets each worker's local rank (LOCAL_RANK, or --local_rank on the command "
                                   "line); remove it from the spec (-1 or 0 are accepted)";
      });
}

}  // namespace

void TrainingArgs::declare(Schema<TrainingArgs>& s) {
  // Grouped by theme; the order of the calls is the order of the options in dumps and listings.
  declare_output(s);
  declare_batches_and_length(s);
  declare_optimization(s);
  declare_logging_schedule(s);
  declare_evaluation_schedule(s);
  declare_saving(s);
  declare_resume(s);
  declare_best_model(s);
  declare_data_order(s);
  declare_step_accounting(s);
  declare_loss_and_memory(s);
  declare_prediction(s);
  declare_reporting(s);
  declare_eval_precision_and_device(s);
  declare_hf_compatibility(s);
}

bool ReportTargets::has(const std::string& target) const {
  for (const auto& n : names)
    if (n == target || n == "all") return true;
  return false;
}

void DistributedArgs::declare(Schema<DistributedArgs>& s) {
  s.add("nproc_per_node", &DistributedArgs::nproc_per_node,
        "Worker processes on this node, or auto: one per visible GPU (CUDA_VISIBLE_DEVICES honoured), 1 on the CPU.")
      .check([](const WorkerCount& w) {
        return !w.automatic && w.count < 1 ? "must be >= 1 or auto, got " + std::to_string(w.count) : std::string();
      });
  s.add("backend", &DistributedArgs::backend, "Collective backend: auto = nccl on GPUs, gloo on the CPU.")
      .choices({"auto", "gloo", "nccl"});
  s.add("ddp_timeout", &DistributedArgs::ddp_timeout, "Seconds before a collective is declared hung.").min(1);
  s.add("rendezvous_timeout", &DistributedArgs::rendezvous_timeout,
        "Seconds the workers wait for every node to join before the job stops, naming the missing ones.").min(1);
  s.add("ddp_bucket_cap_mb", &DistributedArgs::ddp_bucket_cap_mb, "Gradient bucket size in MiB.").greater_than(0);
  s.add("max_restarts", &DistributedArgs::max_restarts, "Relaunches after a worker failure.").min(0);
  s.add("intra_op_threads", &DistributedArgs::intra_op_threads,
        "LibTorch intra-op threads per worker; 0 = automatic (cores / workers with OpenMP OpenBLAS, 1 with pthread OpenBLAS).").min(0);
  s.add("sequence_parallel_size", &DistributedArgs::sequence_parallel_size,
        "Ulysses sequence parallelism: groups of this many consecutive ranks share each batch, each rank holding a "
        "slice of every sequence and attending over the whole sequence for a share of the heads; the world size must "
        "be a multiple of it (data parallel over world / size). 1 = off. DeepSpeed's sequence_parallel_size, "
        "Accelerate's parallelism_config_sp_size.")
      .min(1)
      .deepspeed({"sequence_parallel_size"});
  s.add("expert_parallel_size", &DistributedArgs::expert_parallel_size,
        "Expert parallelism for MoE models (DeepSpeed-MoE's ep_size): groups of this many consecutive ranks each run "
        "experts/size of every routed layer for the group's tokens (all-to-all); at zero.stage 1-2, unless an adapter "
        "run, a member's experts live only on its ranks. World size and expert counts: multiples of it. 1 = off.").min(1);
}

void OffloadOptimizerArgs::declare(Schema<OffloadOptimizerArgs>& s) {
  s.add("device", &OffloadOptimizerArgs::device,
        "Where the fp32 master weights (mixed precision) and optimizer state live: none, cpu (this CPU build's "
        "memory: nothing moves) or nvme (swap files under nvme_path, streamed through the step).")
      .choices({"none", "cpu", "nvme"});
  s.add("nvme_path", &OffloadOptimizerArgs::nvme_path,
        "device nvme: an existing, writable directory; each rank keeps its swap files in a subdirectory, removed "
        "at exit.");
  s.add("buffer_count", &OffloadOptimizerArgs::buffer_count,
        "device nvme: aligned buffers the optimizer step streams the state through (one sub-group being "
        "updated, the next being read, the previous being written back).")
      .min(3);
}

void AioArgs::declare(Schema<AioArgs>& s) {
  s.add("block_size", &AioArgs::block_size, "Bytes per asynchronous I/O request to the swap files.").min(4096);
  s.add("queue_depth", &AioArgs::queue_depth, "Asynchronous I/O requests in flight at most.").min(1);
  s.add("overlap_events", &AioArgs::overlap_events,
        "Submit further requests while earlier ones complete (false: one request at a time).");
}

void ZeroArgs::declare(Schema<ZeroArgs>& s) {
  // DeepSpeed's names and aliases (.deepspeed) are those of its runtime/zero/config.py.
  s.add("stage", &ZeroArgs::stage, "ZeRO stage: 0 (plain data parallel), 1, 2 or 3.").min(0).max(3).deepspeed({"stage"});
  s.add_section("offload_optimizer", &ZeroArgs::offload_optimizer,
                "Optimizer-state offload (DeepSpeed's offload_optimizer): a mapping, or the device alone.", "device");
  s.add_section("aio", &ZeroArgs::aio, "Asynchronous I/O of NVMe offload (DeepSpeed's aio section).");
  s.add("sub_group_size", &ZeroArgs::sub_group_size,
        "offload_optimizer nvme: elements of a partition the optimizer swaps in, updates and writes back at a time "
        "(DeepSpeed's name and default; without nvme offload each partition is stepped in one pass).")
      .min(1)
      .deepspeed({"sub_group_size"});
  s.add("offload_param", &ZeroArgs::offload_param,
        "Stage 3 parameter offload device: none, cpu (this CPU build's memory: nothing moves) or nvme (the "
        "parameter shards live in the optimizer's swap files and are read for each gather; needs "
        "offload_optimizer nvme).")
      .choices({"none", "cpu", "nvme"});
  s.add("reduce_dtype", &ZeroArgs::reduce_dtype,
        "Dtype gradients are reduced in across workers (DeepSpeed communication_data_type): auto = the "
        "parameters' dtype (bf16/fp16 with mixed precision), fp32 = convert each bucket to fp32 first "
        "(twice the traffic, no 16-bit rounding in the sum).")
      .choices({"auto", "fp32"});
  s.add("stage3_param_persistence_threshold", &ZeroArgs::stage3_param_persistence_threshold,
        "Stage 3: parameters with fewer elements stay whole on every rank (biases, norms), saving gathers "
        "(DeepSpeed's name and default).")
      .min(0)
      .deepspeed({"stage3_param_persistence_threshold", "param_persistence_threshold"});
  s.add("stage3_prefetch_bucket_size", &ZeroArgs::stage3_prefetch_bucket_size,
        "Stage 3: elements of the next modules' parameters gathered ahead while the current module computes; "
        "0 = no prefetch (DeepSpeed's name and default).")
      .min(0)
      .deepspeed({"stage3_prefetch_bucket_size", "prefetch_bucket_size"});
  s.add("stage3_max_live_parameters", &ZeroArgs::stage3_max_live_parameters,
        "Stage 3: prefetching stops where it would make more elements whole at once; the module that runs is "
        "always gathered (DeepSpeed's name and default).")
      .min(1)
      .deepspeed({"stage3_max_live_parameters", "max_live_parameters"});
  s.add("stage3_gather_16bit_weights_on_model_save", &ZeroArgs::stage3_gather_16bit_weights_on_model_save,
        "Stage 3: at the end of training write model.safetensors, gathering one parameter group at a time from "
        "the ranks' shards to rank 0 (never the whole model in one process). false = write only a final "
        "checkpoint of the shards and consolidate it later with `hftrain zero-to-fp32` (DeepSpeed's name; its "
        "default is false, hftrain's true so that every run ends with a model).")
      .deepspeed({"stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
                  "gather_16bit_weights_on_model_save"});
  s.add("zero3_init_flag", &ZeroArgs::zero3_init_flag,
        "Stage 3: build the model without ever holding it whole (DeepSpeed's zero.Init; Accelerate's name): each "
        "module's parameters are released as soon as it is built and every rank keeps only its partition of "
        "the initial values, which equal those of a whole-model construction (every model family; a "
        "model.from_pretrained directory without config.json is loaded whole, then partitioned, as the log says).");
}

void PrecisionArgs::declare(Schema<PrecisionArgs>& s) {
  s.add("bf16", &PrecisionArgs::bf16,
        "Parameters, gradients and activations in bfloat16 (matmuls in bf16, autocast's fp32 ops and the loss in "
        "fp32); the optimizer updates fp32 master weights (HF --bf16, DeepSpeed bf16.enabled).");
  s.add("fp16", &PrecisionArgs::fp16,
        "As bf16 in float16, with loss scaling (HF --fp16, DeepSpeed fp16.enabled). Needs a CUDA device.");
  s.add("loss_scale", &PrecisionArgs::loss_scale, "fp16: static loss scale; 0 = dynamic (DeepSpeed fp16.loss_scale).").min(0);
  s.add("initial_scale_power", &PrecisionArgs::initial_scale_power, "fp16: the dynamic scale starts at 2^N.").min(0).max(64);
  s.add("loss_scale_window", &PrecisionArgs::loss_scale_window,
        "fp16: steps without overflow before the dynamic scale doubles.").min(1);
  s.add("hysteresis", &PrecisionArgs::hysteresis,
        "fp16: overflows tolerated before the dynamic scale halves (DeepSpeed's delayed shift).").min(1);
  s.add("consecutive_hysteresis", &PrecisionArgs::consecutive_hysteresis,
        "fp16: refill the hysteresis after every overflow-free step (else only when the scale grows).");
  s.add("min_loss_scale", &PrecisionArgs::min_loss_scale,
        "fp16: lowest dynamic loss scale; an overflow there ends the run with an error.").greater_than(0);
  s.add("save_dtype", &PrecisionArgs::save_dtype,
        "Dtype of the saved model.safetensors: fp32 (default; from the fp32 master weights, nothing lost), bf16 "
        "or fp16 (half the size). Checkpoints always keep the fp32 masters.")
      .choices({"fp32", "bf16", "fp16"});
}

void DataSampleLimits::declare(Schema<DataSampleLimits>& s) {
  s.add("max_train_samples", &DataSampleLimits::max_train_samples,
        "Train on the first N training examples only (HF max_train_samples, for debugging or quicker runs); null = all.")
      .min(1);
  s.add("max_eval_samples", &DataSampleLimits::max_eval_samples,
        "Evaluate on the first N evaluation examples only (HF max_eval_samples); null = all.")
      .min(1);
  s.add("max_predict_samples", &DataSampleLimits::max_predict_samples,
        "Predict for the first N test examples (or prompts of predict --prompts) only (HF max_predict_samples); null = all.")
      .min(1);
}

void GenerationArgs::declare(Schema<GenerationArgs>& s) {
  s.add("max_new_tokens", &GenerationArgs::max_new_tokens,
        "Tokens generated per prompt at most; null = up to max_length, or 16 when that is null too (set, it wins "
        "over max_length, as in HF).")
      .min(1);
  s.add("max_length", &GenerationArgs::max_length,
        "HF max_length: the longest sequence, prompt included (decoder-only) or decoder start token included "
        "(encoder-decoder); null = max_new_tokens decides.")
      .min(1);
  s.add("min_length", &GenerationArgs::min_length,
        "HF min_length: eos is forbidden while the sequence (counted as max_length is) is shorter; null = off.")
      .min(0);
  s.add("do_sample", &GenerationArgs::do_sample, "Sample the next token (true) or take the most likely one (false).");
  s.add("temperature", &GenerationArgs::temperature, "Sampling temperature (logits divided by it).").greater_than(0);
  s.add("top_k", &GenerationArgs::top_k, "Sample among the k most likely tokens; 0 = no limit.").min(0);
  s.add("top_p", &GenerationArgs::top_p, "Nucleus sampling: smallest set of tokens with this total probability.").greater_than(0).max(1);
  s.add("seed", &GenerationArgs::seed, "Seed of the sampling generator; null = training.seed.");
  s.add("eos_token_id", &GenerationArgs::eos_token_id, "Stop after this token; null = the tokenizer's eos token (if any).");
  s.add("min_new_tokens", &GenerationArgs::min_new_tokens, "The eos token is forbidden until this many tokens were generated.")
      .min(0);
  s.add("no_repeat_ngram_size", &GenerationArgs::no_repeat_ngram_size,
        "Forbid any token that would repeat an n-gram of this size (prompt included); 0 = off.")
      .min(0);
  s.add("num_beams", &GenerationArgs::num_beams, "Beam search with this many beams; 1 = greedy decoding or sampling.").min(1);
  s.add("length_penalty", &GenerationArgs::length_penalty,
        "Beam search: a finished hypothesis scores sum of log-probabilities / generated length ** length_penalty "
        "(> 0 favours longer, < 0 shorter sequences).");
  s.add("early_stopping", &GenerationArgs::early_stopping,
        "Beam search: true = stop once num_beams hypotheses are finished; false = once they are and the best "
        "running beam, scored at its current length, cannot beat the worst of them; never = only when no running "
        "beam can.")
      .choices({"false", "true", "never"});
  s.add("num_return_sequences", &GenerationArgs::num_return_sequences,
        "Beam search: write this many best hypotheses per prompt (at most num_beams).")
      .min(1);
  s.add("forced_bos_token_id", &GenerationArgs::forced_bos_token_id,
        "Force this token first (HF ForcedBOSTokenLogitsProcessor: at sequence length 1, e.g. mBART's language "
        "token); null = off.")
      .min(0);
  s.add("forced_eos_token_id", &GenerationArgs::forced_eos_token_id,
        "Force this token when the length limit is reached (HF ForcedEOSTokenLogitsProcessor); null = off.")
      .min(0);
}

}  // namespace hftrain
