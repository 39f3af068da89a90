// DeepSpeed key tables and value helpers (see deepspeed_keys.h).
#include "runspec/deepspeed_keys.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace hftrain::deepspeed {

using nlohmann::json;

const std::vector<KnownKey> kTopLevelOthers = {
    {"steps_per_print", KeyKind::hint, "hftrain logs every training.logging_steps"},
    {"wall_clock_breakdown", KeyKind::hint, "hftrain reports step timing in its logs and report"},
    {"memory_breakdown", KeyKind::hint, "hftrain reports memory in its logs and report"},
    {"dump_state", KeyKind::hint, "a debugging print of DeepSpeed's engine"},
    {"flops_profiler", KeyKind::hint, "a profiler; hftrain reports throughput and FLOPs itself"},
    {"tensorboard", KeyKind::hint, "hftrain writes TensorBoard events per training.report_to"},
    {"wandb", KeyKind::hint, "a monitor; use training.report_to"},
    {"csv_monitor", KeyKind::hint, "a monitor; use training.report_to"},
    {"comet", KeyKind::hint, "a monitor; use training.report_to"},
    {"comms_logger", KeyKind::hint, "a communication logger"},
    {"timers", KeyKind::hint, "DeepSpeed's internal timers"},
    {"zero_allow_untested_optimizer", KeyKind::hint, "every hftrain optimizer works with every ZeRO stage it accepts"},
    {"zero_force_ds_cpu_optimizer", KeyKind::hint, "hftrain's optimizers run on the CPU already"},
    {"dataloader_drop_last", KeyKind::hint, "DeepSpeed's own data loader, which the HF Trainer does not use; see "
                                            "training.dataloader_drop_last"},
    {"checkpoint", KeyKind::hint, "hftrain's checkpoints are written atomically with a manifest"},
    {"compile", KeyKind::hint, "torch.compile; hftrain is compiled ahead of time"},
    {"seq_parallel_communication_data_type", KeyKind::hint,
     "sequence parallelism's all-to-all carries the activations in their own dtype"},
    {"prescale_gradients", KeyKind::refused, "pre-dividing gradients before the reduction is not available", "false"},
    {"gradient_predivide_factor", KeyKind::refused, "a gradient pre-division factor is not available", "1"},
    {"sparse_gradients", KeyKind::refused, "sparse gradients are not available", "false"},
    {"disable_allgather", KeyKind::refused, "broadcasting instead of all-gathering is not available", "false"},
    {"curriculum_learning", KeyKind::refused, "curriculum learning is not available"},
    {"data_efficiency", KeyKind::refused, "DeepSpeed's data-efficiency library is not available"},
    {"compression_training", KeyKind::refused, "compression training is not available"},
    {"pipeline", KeyKind::refused, "pipeline parallelism is not available"},
    {"sparse_attention", KeyKind::refused, "sparse attention is not available"},
    {"elasticity", KeyKind::refused, "elastic batch sizes are not available"},
    {"progressive_layer_drop", KeyKind::refused, "progressive layer drop is not available"},
    {"eigenvalue", KeyKind::refused, "eigenvalue computation is not available"},
    {"quantize_training", KeyKind::refused, "quantised training is not available"},
    {"weight_quantization", KeyKind::refused, "weight quantisation is not available"},
    {"hybrid_engine", KeyKind::refused, "the RLHF hybrid engine is not available"},
    {"autotuning", KeyKind::refused, "the autotuner is not available"},
    {"nebula", KeyKind::refused, "Nebula checkpointing is not available"},
};

const std::vector<std::string> kZeroFilledFromModel = {"stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"};

const std::vector<KnownKey> kZeroOthers = {
    {"overlap_comm", KeyKind::hint, "hftrain reduces each gradient bucket as soon as it is complete"},
    {"contiguous_gradients", KeyKind::hint, "hftrain's gradients always live in contiguous flat buffers"},
    {"allgather_partitions", KeyKind::hint, "the result is the same either way"},
    {"allgather_bucket_size", KeyKind::hint, "hftrain all-gathers per parameter group"},
    {"reduce_scatter", KeyKind::hint, "the result is the same either way"},
    {"round_robin_gradients", KeyKind::hint, "a copy-order optimisation for CPU offload"},
    {"elastic_checkpoint", KeyKind::hint, "hftrain's checkpoints record their layout"},
    {"stage3_max_reuse_distance", KeyKind::hint, "hftrain releases a gathered module once its uses are done"},
    {"max_reuse_distance", KeyKind::hint, "hftrain releases a gathered module once its uses are done"},
    {"load_from_fp32_weights", KeyKind::hint, "hftrain resumes from the fp32 master weights"},
    {"memory_efficient_linear", KeyKind::hint, "hftrain's linear layers keep no extra copies"},
    {"ignore_unused_parameters", KeyKind::hint, "parameters without a gradient are skipped by the optimizer"},
    {"legacy_stage1", KeyKind::hint, "a DeepSpeed implementation choice"},
    {"cpu_offload_use_pin_memory", KeyKind::hint, "nothing is pinned on a CPU build"},
    {"stage3_module_granularity_threshold", KeyKind::hint, "hftrain gathers per transformer block"},
    {"log_trace_cache_warnings", KeyKind::hint, "hftrain has no trace cache"},
    {"use_multi_rank_bucket_allreduce", KeyKind::hint, "a communication-order optimisation"},
    {"stage3_use_all_reduce_for_fetch_params", KeyKind::hint, "a communication-order optimisation"},
    {"zero_hpz_partition_size", KeyKind::refused, "hierarchical partitioning (ZeRO++ hpZ) is not available", "1"},
    {"zero_quantized_weights", KeyKind::refused, "quantised weight gathers (ZeRO++ qwZ) are not available", "false"},
    {"zero_quantized_nontrainable_weights", KeyKind::refused, "quantised frozen weights are not available", "false"},
    {"zero_quantized_gradients", KeyKind::refused, "quantised gradient reduction (ZeRO++ qgZ) is not available", "false"},
    {"mics_shard_size", KeyKind::refused, "MiCS sharding groups are not available", "-1"},
    {"mics_hierarchical_params_gather", KeyKind::refused, "MiCS hierarchical gathers are not available", "false"},
};

// offload_optimizer keys accepted without effect (why); the others are zero.offload_optimizer's own options
// (placed_keys).
const std::vector<std::pair<std::string, std::string>> kOffloadOptimizerHints = {
    {"pin_memory", "nothing is pinned on a CPU build"},
    {"fast_init", "the swap files are written once at the start either way"},
    {"pipeline_read", "hftrain always reads the next sub-group while the current one is updated"},
    {"pipeline_write", "hftrain always writes the previous sub-group back while the current one is updated"},
    {"ratio", "a partial-offload ratio for accelerators; on the CPU the whole update runs here"}};
// offload_param keys accepted without effect (why); its device is placed into zero.offload_param.
const std::vector<std::pair<std::string, std::string>> kOffloadParamHints = {
    {"nvme_path", "the parameter shards share the optimizer's swap files under offload_optimizer.nvme_path"},
    {"pin_memory", "nothing is pinned on a CPU build"},
    {"buffer_count", "each gather reads its shard straight from the swap file; there is no parameter buffer pool"},
    {"buffer_size", "each gather reads its shard straight from the swap file; there is no parameter buffer pool"},
    {"max_in_cpu", "shards are read for each gather and dropped after it; none are cached in memory"}};
// aio keys accepted without effect; the others are zero.aio's own options (placed_keys).
// activation_checkpointing keys besides cpu_checkpointing (training.gradient_checkpointing_offload).
const std::vector<std::pair<std::string, std::string>> kActivationCheckpointingHints = {
    {"partition_activations", "it splits checkpoints over model-parallel ranks, which hftrain does not have "
                              "(distributed.sequence_parallel_size slices the sequence instead)"},
    {"contiguous_memory_optimization", "checkpoints are the blocks' own tensors"},
    {"number_checkpoints", "every transformer block is checkpointed (training.gradient_checkpointing)"},
    {"synchronize_checkpoint_boundary", "a CUDA synchronisation for profiling"},
    {"profile", "DeepSpeed's checkpointing timers"}};

const std::vector<std::pair<std::string, std::string>> kAioHints = {
    {"thread_count", "one submitting thread per rank; the kernel runs the requests"},
    {"single_submit", "requests are submitted as they are cut"},
    {"use_gds", "GPUDirect Storage needs a GPU"},
    {"intra_op_parallelism", "one submitting thread per rank"}};

// DeepSpeed optimizer types (lower case, as DeepSpeed compares them) and the hftrain optimizer that runs them.
const std::map<std::string, std::string> kOptimizers = {
    {"adam", "adamw"}, {"adamw", "adamw"}, {"lion", "lion"}, {"sgd", "sgd"}, {"adagrad", "adagrad"}};
const std::vector<std::string> kUnavailableOptimizers = {"lamb",   "onebitadam", "zerooneadam", "onebitlamb",
                                                         "muadam", "muadamw",    "musgd"};
// optimizer.params keys compared with TrainingArguments, and the other keys each type takes.
const std::vector<std::string> kMatchedOptimizerParams = {"lr", "betas", "eps", "weight_decay"};
const std::map<std::string, std::vector<std::string>> kOptimizerParams = {
    {"adamw", {"adam_w_mode", "torch_adam", "bias_correction", "amsgrad", "fused", "foreach"}},
    {"adam", {"adam_w_mode", "torch_adam", "bias_correction", "amsgrad", "fused", "foreach"}},
    {"lion", {}},
    {"sgd", {"momentum", "dampening", "nesterov", "foreach"}},
    {"adagrad", {"lr_decay", "initial_accumulator_value", "foreach"}}};

// Each DeepSpeed scheduler's params (last_batch_iteration: -1 only).
const std::map<std::string, std::vector<std::string>> kSchedulerParams = {
    {"WarmupLR", {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"}},
    {"WarmupDecayLR",
     {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps", "last_batch_iteration"}},
    {"WarmupCosineLR",
     {"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type", "last_batch_iteration"}}};

std::vector<std::string> names_of(const std::vector<KnownKey>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_auto(const YAML::Node& n) { return n.IsScalar() && n.Scalar() == "auto"; }

json to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = to_json(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& item : n) a.push_back(to_json(item));
    return a;
  }
  if (!n.IsDefined() || n.IsNull()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && end == s.c_str() + s.size()) return i;
  const double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size()) return d;
  return s;
}

YAML::Node spec_value(const YAML::Node& n) {
  if (!n.IsScalar() || n.Tag() == "!") return n;
  char* end = nullptr;
  const double d = std::strtod(n.Scalar().c_str(), &end);
  if (end != n.Scalar().c_str() + n.Scalar().size() || n.Scalar().empty()) return n;
  if (std::floor(d) == d && std::fabs(d) < 9.0e15 && n.Scalar().find_first_of(".eE") != std::string::npos)
    return YAML::Node(std::to_string(static_cast<int64_t>(d)));
  return n;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

}  // namespace hftrain::deepspeed
