// The Accelerate config key table (see accelerate_keys.h).
#include "runspec/accelerate_keys.h"

#include <algorithm>
#include <cctype>

namespace hftrain::accelerate {

namespace {
const std::string kTpu = "a TPU (XLA) launch setting; distributed_type XLA is refused, so it is never used";
const std::string kDynamo = "torch.compile (TorchDynamo); hftrain is compiled ahead of time, results are unchanged";
const std::string kGathers = "hftrain gathers and shards per transformer block, which is what TRANSFORMER_BASED_WRAP "
                             "(or a size policy over those blocks) selects";

// ClusterConfig, top level.
std::vector<Key> top_level_keys() {
  using T = Treatment;
  return {
      {"", "compute_environment", T::mapped, "LOCAL_MACHINE (the default); AMAZON_SAGEMAKER is refused"},
      {"", "distributed_type", T::mapped,
       "required: NO, MULTI_GPU, MULTI_CPU (use_cpu), DEEPSPEED (reads deepspeed_config), FSDP (reads fsdp_config); "
       "others are refused"},
      {"", "mixed_precision", T::mapped, "precision.bf16 / precision.fp16 (no: both false); fp8 is refused"},
      {"", "use_cpu", T::mapped, "training.use_cpu"},
      {"", "num_processes", T::mapped, "distributed.nproc_per_node = num_processes / num_machines"},
      {"", "num_machines", T::mapped, "--nnodes"},
      {"", "machine_rank", T::mapped, "--node-rank"},
      {"", "main_process_ip", T::mapped, "--master-addr"},
      {"", "main_process_port", T::mapped, "--master-port (null or 0: a free port on one node)"},
      {"", "rdzv_backend", T::mapped, "static or c10d: both meet at node 0's address; etcd is refused"},
      {"", "gpu_ids", T::mapped, "CUDA_VISIBLE_DEVICES of the workers (all: not restricted)"},
      {"", "deepspeed_config", T::mapped, "with distributed_type DEEPSPEED: the zero / training settings below"},
      {"", "fsdp_config", T::mapped, "with distributed_type FSDP: the zero / training settings below"},
      {"", "debug", T::accepted, "Accelerate's debug mode checks collective shapes; results are unchanged"},
      {"", "same_network", T::accepted, "every node reaches node 0 at main_process_ip either way"},
      {"", "main_training_function", T::accepted, "names the function a TPU or notebook launch calls; hftrain runs the run spec"},
      {"", "enable_cpu_affinity", T::accepted, "NUMA affinity of GPU workers, a speed setting"},
      {"", "downcast_bf16", T::accepted, "TPU only (XLA_DOWNCAST_BF16)"},
      {"", "dynamo_config", T::accepted, kDynamo},
      {"", "dynamo_backend", T::accepted, kDynamo + " (the older spelling of dynamo_config)"},
      {"", "tpu_name", T::accepted, kTpu},
      {"", "tpu_zone", T::accepted, kTpu},
      {"", "tpu_use_cluster", T::accepted, kTpu},
      {"", "tpu_use_sudo", T::accepted, kTpu},
      {"", "tpu_vm", T::accepted, kTpu},
      {"", "tpu_env", T::accepted, kTpu},
      {"", "command_file", T::accepted, kTpu},
      {"", "commands", T::accepted, kTpu},
      {"", "fp8_config", T::refused, "FP8 training (Transformer Engine / MS-AMP / torchao) is not available"},
      {"", "megatron_lm_config", T::refused, "Megatron-LM tensor / pipeline / sequence parallelism is not available"},
      {"", "parallelism_config", T::mapped, "ParallelismConfig: its sequence-parallel settings below; tensor / context "
                                            "parallelism and replicated sharding are refused"},
      {"", "tp_config", T::refused, "tensor parallelism (TorchTensorParallelPlugin, tp_size) is not available"},
      {"", "ipex_config", T::accepted, "Intel Extension for PyTorch speeds up PyTorch's own CPU operators; hftrain "
                                       "runs its own, results are unchanged"},
      {"", "mpirun_config", T::refused, "hftrain starts its own workers on each node; launching through mpirun is not "
                                        "available"},
  };
}

// deepspeed_config.
std::vector<Key> deepspeed_config_keys() {
  using T = Treatment;
  return {
      {"deepspeed_config", "deepspeed_config_file", T::mapped, "training.deepspeed (the ds_config JSON)"},
      {"deepspeed_config", "zero_stage", T::mapped, "zero.stage (absent: 2, DeepSpeedPlugin's default)"},
      {"deepspeed_config", "gradient_accumulation_steps", T::mapped, "training.gradient_accumulation_steps"},
      {"deepspeed_config", "gradient_clipping", T::mapped, "training.max_grad_norm"},
      {"deepspeed_config", "offload_optimizer_device", T::mapped, "zero.offload_optimizer.device"},
      {"deepspeed_config", "offload_optimizer_nvme_path", T::mapped, "zero.offload_optimizer.nvme_path"},
      {"deepspeed_config", "offload_param_device", T::mapped,
       "zero.offload_param (stage 3; DeepSpeed uses it at no other stage)"},
      {"deepspeed_config", "zero3_init_flag", T::mapped, "zero.zero3_init_flag"},
      {"deepspeed_config", "zero3_save_16bit_model", T::mapped, "zero.stage3_gather_16bit_weights_on_model_save"},
      {"deepspeed_config", "seq_parallel_communication_data_type", T::accepted,
       "sequence parallelism's all-to-all carries the activations in their own dtype"},
      {"deepspeed_config", "offload_param_nvme_path", T::accepted,
       "the parameter shards share the optimizer's swap files under offload_optimizer_nvme_path"},
      {"deepspeed_config", "deepspeed_multinode_launcher", T::refused,
       "hftrain is started on each node, as the standard launcher is; pdsh / MPI / SLURM launching is not available",
       {"standard"}},
      {"deepspeed_config", "deepspeed_hostfile", T::refused, "hftrain is started on each node itself; a hostfile is not read",
       {"none", ""}},
      {"deepspeed_config", "deepspeed_inclusion_filter", T::refused, "a hostfile filter; hostfiles are not read", {"none", ""}},
      {"deepspeed_config", "deepspeed_exclusion_filter", T::refused, "a hostfile filter; hostfiles are not read", {"none", ""}},
      {"deepspeed_config", "deepspeed_moe_layer_cls_names", T::refused, "mixture-of-experts layers are not available",
       {"none", ""}},
  };
}

// parallelism_config (Accelerate's ParallelismConfig, its DeepSpeed / Ulysses sequence parallelism).
std::vector<Key> parallelism_config_keys() {
  using T = Treatment;
  const std::string kWhole = "hftrain slices each batch at its own length, padded to a multiple of the group";
  const std::string kNoContext = "context parallelism is refused (parallelism_config_cp_size), so this is never used";
  return {
      {"parallelism_config", "parallelism_config_sp_size", T::mapped, "distributed.sequence_parallel_size"},
      {"parallelism_config", "parallelism_config_sp_backend", T::refused,
       "Ulysses (DeepSpeed's all-to-all of heads for sequence) is the sequence parallelism hftrain runs", {"deepspeed"}},
      {"parallelism_config", "parallelism_config_sp_seq_length", T::accepted, kWhole},
      {"parallelism_config", "parallelism_config_sp_seq_length_is_variable", T::accepted, kWhole},
      {"parallelism_config", "parallelism_config_sp_attn_implementation", T::accepted,
       "hftrain's own attention dispatch runs the exchanged heads, padding-free rows example by example"},
      {"parallelism_config", "parallelism_config_dp_shard_size", T::accepted,
       "ZeRO (zero.stage) shards over every rank; the data-parallel replicas are world / sequence_parallel_size"},
      {"parallelism_config", "parallelism_config_dp_replicate_size", T::refused,
       "replicated groups of shards (HSDP) are not available", {"1"}},
      {"parallelism_config", "parallelism_config_tp_size", T::refused, "tensor parallelism is not available", {"1"}},
      {"parallelism_config", "parallelism_config_cp_size", T::refused, "context parallelism (ring attention) is not available",
       {"1"}},
      {"parallelism_config", "parallelism_config_cp_backend", T::accepted, kNoContext},
      {"parallelism_config", "parallelism_config_cp_comm_strategy", T::accepted, kNoContext},
  };
}

// fsdp_config (FSDP's sharding is ZeRO's: docs/distributed.md).
std::vector<Key> fsdp_config_keys() {
  using T = Treatment;
  return {
      {"fsdp_config", "fsdp_sharding_strategy", T::mapped,
       "zero.stage: FULL_SHARD (1) = 3, SHARD_GRAD_OP (2) = 2, NO_SHARD (3) = 0 (absent: FULL_SHARD); HYBRID_SHARD "
       "(4, 5) is refused"},
      {"fsdp_config", "fsdp_reshard_after_forward", T::mapped, "zero.stage (FSDP2: true = 3, false = 2)"},
      {"fsdp_config", "fsdp_offload_params", T::mapped, "zero.offload_param cpu when true"},
      {"fsdp_config", "fsdp_backward_prefetch", T::mapped,
       "NO_PREFETCH = zero.stage3_prefetch_bucket_size 0; BACKWARD_PRE / BACKWARD_POST prefetch, as hftrain does"},
      {"fsdp_config", "fsdp_cpu_ram_efficient_loading", T::mapped, "zero.zero3_init_flag"},
      {"fsdp_config", "fsdp_activation_checkpointing", T::mapped, "training.gradient_checkpointing"},
      {"fsdp_config", "fsdp_version", T::accepted, "FSDP1 and FSDP2 shard the same state"},
      {"fsdp_config", "fsdp_auto_wrap_policy", T::accepted, kGathers},
      {"fsdp_config", "fsdp_transformer_layer_cls_to_wrap", T::accepted, kGathers},
      {"fsdp_config", "fsdp_min_num_params", T::accepted, kGathers},
      {"fsdp_config", "fsdp_forward_prefetch", T::accepted, "hftrain prefetches the next block in forward and backward"},
      {"fsdp_config", "fsdp_state_dict_type", T::accepted,
       "the final model is saved whole (FULL_STATE_DICT) and checkpoints keep per-rank shards (SHARDED_STATE_DICT), "
       "whichever is named"},
      {"fsdp_config", "fsdp_use_orig_params", T::accepted, "parameters keep their names and groups"},
      {"fsdp_config", "fsdp_sync_module_states", T::accepted, "rank 0's initial weights reach every rank"},
  };
}

}  // namespace

const std::vector<Key>& keys() {
  static const std::vector<Key> table = [] {
    std::vector<Key> all = top_level_keys();
    for (auto block : {deepspeed_config_keys(), fsdp_config_keys(), parallelism_config_keys()})
      all.insert(all.end(), block.begin(), block.end());
    return all;
  }();
  return table;
}

const std::vector<std::string> kOwnedByDeepSpeedFile = {
    "gradient_accumulation_steps", "gradient_clipping",       "zero_stage",           "offload_optimizer_device",
    "offload_param_device",        "offload_param_nvme_path", "offload_optimizer_nvme_path", "zero3_save_16bit_model"};

const std::vector<std::pair<std::string, std::string>> kRenamedFsdpKeys = {
    {"fsdp_backward_prefetch_policy", "fsdp_backward_prefetch"}};

const Key* find_key(const std::string& block, const std::string& name) {
  for (const auto& k : keys())
    if (k.block == block && k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> names_in(const std::string& block) {
  std::vector<std::string> out;
  for (const auto& k : keys())
    if (k.block == block) out.push_back(k.name);
  return out;
}

bool is_neutral(const Key& key, const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return true;
  if ((value.IsMap() || value.IsSequence()) && value.size() == 0) return true;
  if (!value.IsScalar()) return false;
  std::string v = value.Scalar();
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(key.neutral.begin(), key.neutral.end(), v) != key.neutral.end();
}

}  // namespace hftrain::accelerate
