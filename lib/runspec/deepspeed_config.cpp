// DeepSpeed configuration files mapped onto the run spec (see deepspeed_config.h). The key tables
// follow DeepSpeed's runtime/config.py and zero/config.py names; the "auto" rules and the mismatch
// report follow transformers' integrations/deepspeed.py (HfTrainerDeepSpeedConfig).
#include "runspec/deepspeed_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/duplicate_keys.h"
#include "runspec/hf_names.h"
#include "runspec/run_spec.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

using nlohmann::json;

bool is_auto(const YAML::Node& n) { return n.IsScalar() && n.Scalar() == "auto"; }

// JSON of a YAML tree read from JSON text (or an inline spec mapping): quoted scalars stay strings,
// plain ones become null, booleans, integers or numbers when they read as such.
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

// A DeepSpeed number as the spec's option reads it: 5e8 or 2.0 for an integer option becomes "500000000" / "2".
YAML::Node spec_value(const YAML::Node& n) {
  if (!n.IsScalar() || n.Tag() == "!") return n;
  char* end = nullptr;
  const double d = std::strtod(n.Scalar().c_str(), &end);
  if (end != n.Scalar().c_str() + n.Scalar().size() || n.Scalar().empty()) return n;
  if (std::floor(d) == d && std::fabs(d) < 9.0e15 && n.Scalar().find_first_of(".eE") != std::string::npos)
    return YAML::Node(std::to_string(static_cast<int64_t>(d)));
  return n;
}

// How hftrain treats a DeepSpeed key it does not map onto a section.
enum class KeyKind {
  hint,     // changes no result: accepted, with one log line saying so
  refused,  // a feature hftrain lacks: refused naming the key, unless it holds its neutral value
};
struct KnownKey {
  std::string name;
  KeyKind kind;
  std::string reason;
  std::string neutral = "";  // refused keys: the value (or, for a section, enabled: false) that asks for nothing
};

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
    {"activation_checkpointing", KeyKind::hint,
     "only models that call deepspeed.checkpointing use it; use training.gradient_checkpointing"},
    {"dataloader_drop_last", KeyKind::hint, "DeepSpeed's own data loader, which the HF Trainer does not use; see "
                                            "training.dataloader_drop_last"},
    {"checkpoint", KeyKind::hint, "hftrain's checkpoints are written atomically with a manifest"},
    {"compile", KeyKind::hint, "torch.compile; hftrain is compiled ahead of time"},
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

// offload_optimizer keys placed into zero.offload_optimizer, and those accepted without effect (why).
const std::vector<std::string> kOffloadOptimizerKeys = {"device", "nvme_path", "buffer_count"};
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
// aio keys placed into zero.aio, and those accepted without effect.
const std::vector<std::string> kAioKeys = {"block_size", "queue_depth", "overlap_events"};
const std::vector<std::pair<std::string, std::string>> kAioHints = {
    {"thread_count", "one submitting thread per rank; the kernel runs the requests"},
    {"single_submit", "requests are submitted as they are cut"},
    {"use_gds", "GPUDirect Storage needs a GPU"},
    {"intra_op_parallelism", "one submitting thread per rank"}};
// fp16 loss-scaler keys: the precision section's options of the same name.
const std::vector<std::string> kLossScalerKeys = {"loss_scale",  "initial_scale_power",    "loss_scale_window",
                                                  "hysteresis", "consecutive_hysteresis", "min_loss_scale"};

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

// Reads one DeepSpeed config: validates its keys and places its settings into the spec's sections.
class DeepSpeedReader {
 public:
  DeepSpeedReader(YAML::Node& root, Issues& issues, Issues& file_issues, std::map<std::string, std::string>& origins,
                  std::vector<std::string>& notes, DeepSpeedConfig& out)
      : root_(root), issues_(issues), file_(file_issues), origins_(origins), notes_(notes), out_(out) {}

  void read(const YAML::Node& config) {
    record_locations(config, "");
    for (const auto& kv : config) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "zero_optimization") {
        zero_optimization(v);
      } else if (key == "fp16") {
        fp16(v);
      } else if (key == "bf16" || key == "bfloat16") {
        bf16(key, v);
      } else if (key == "amp") {
        enabled_section_only(key, v, "apex AMP is a CUDA library hftrain does not use; use fp16 or bf16");
      } else if (key == "optimizer") {
        optimizer(v);
      } else if (key == "scheduler") {
        scheduler(v);
      } else if (key == "aio") {
        aio(v);
      } else if (key == "communication_data_type") {
        communication_data_type(v);
      } else if (key == "train_batch_size" || key == "train_micro_batch_size_per_gpu" ||
                 key == "gradient_accumulation_steps" || key == "gradient_clipping") {
        // TrainingArguments values: compared once the sections are parsed (finish_deepspeed_config).
      } else {
        other(key, v, kTopLevelOthers, top_level_names());
      }
    }
  }

 private:
  static std::vector<std::string> top_level_names() {
    std::vector<std::string> names = {"zero_optimization", "fp16", "bf16", "bfloat16", "amp", "optimizer", "scheduler",
                                      "aio", "communication_data_type", "train_batch_size",
                                      "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping"};
    for (const auto& k : kTopLevelOthers) names.push_back(k.name);
    return names;
  }

  void record_locations(const YAML::Node& n, const std::string& path) {
    if (!n.IsMap()) return;
    for (const auto& kv : n) {
      const std::string p = path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar();
      out_.locations[p] = file_.position(kv.second);
      record_locations(kv.second, p);
    }
  }

  void place(const std::string& ds_path, const YAML::Node& v, const std::string& section, const std::string& key,
             const YAML::Node& value) {
    place_setting(root_, issues_, origins_, section, key, spec_value(value), yaml_text(v),
                  SettingSource{"training.deepspeed " + ds_path, v, file_});
  }
  void note(const std::string& ds_path, const std::string& reason) {
    notes_.push_back("DeepSpeed " + ds_path + ": accepted, no effect here (" + reason + ")");
  }
  void problem(const std::string& ds_path, const YAML::Node& v, const std::string& message) {
    file_.add(ds_path, v, message);
  }
  void unknown(const std::string& ds_path, const std::string& key, const YAML::Node& v, const std::vector<std::string>& known) {
    problem(ds_path, v, "unknown DeepSpeed key '" + key + "'" + did_you_mean(key, known) +
                            " (DeepSpeed would ignore it silently; hftrain refuses it)");
  }
  bool expect_map(const std::string& ds_path, const YAML::Node& v) {
    if (v.IsMap()) return true;
    problem(ds_path, v, "expected a mapping");
    return false;
  }

  // A key outside the mapped ones: a hint (logged), a refused feature (unless neutral), or unknown.
  void other(const std::string& ds_path, const YAML::Node& v, const std::vector<KnownKey>& table,
             const std::vector<std::string>& all_names) {
    const std::string key = ds_path.substr(ds_path.rfind('.') + 1);
    auto it = std::find_if(table.begin(), table.end(), [&](const KnownKey& k) { return k.name == key; });
    if (it == table.end()) return unknown(ds_path, key, v, all_names);
    if (it->kind == KeyKind::hint) return note(ds_path, it->reason);
    if (is_neutral(*it, v)) return;
    problem(ds_path, v, it->reason + "; remove '" + key + "'" +
                            (it->neutral.empty() ? " or set its enabled: false" : " or set it to " + it->neutral));
  }
  static bool is_neutral(const KnownKey& k, const YAML::Node& v) {
    if (v.IsMap()) {
      const YAML::Node enabled = lookup(v, "enabled");
      return enabled.IsDefined() && enabled.IsScalar() && enabled.Scalar() == "false";
    }
    return !k.neutral.empty() && same_yaml_value(v, YAML::Node(k.neutral));
  }

  // A section that only asks for something when enabled (amp): refused unless enabled is false.
  void enabled_section_only(const std::string& key, const YAML::Node& v, const std::string& reason) {
    if (!expect_map(key, v)) return;
    if (!is_neutral(KnownKey{key, KeyKind::refused, reason}, v)) problem(key, v, reason + "; remove '" + key + "'");
  }

  void zero_optimization(const YAML::Node& z) {
    if (!expect_map("zero_optimization", z)) return;
    std::vector<std::string> known = {"stage", "offload_optimizer", "offload_param", "reduce_bucket_size", "cpu_offload",
                                      "cpu_offload_params", "stage3_param_persistence_threshold",
                                      "param_persistence_threshold", "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                                      "stage3_max_live_parameters", "max_live_parameters",
                                      "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
                                      "gather_16bit_weights_on_model_save", "sub_group_size"};
    for (const auto& k : kZeroOthers) known.push_back(k.name);
    // DeepSpeed names (and aliases) of zero section keys.
    const std::map<std::string, std::string> stage3 = {
        {"stage3_param_persistence_threshold", "stage3_param_persistence_threshold"},
        {"param_persistence_threshold", "stage3_param_persistence_threshold"},
        {"stage3_prefetch_bucket_size", "stage3_prefetch_bucket_size"},
        {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
        {"stage3_max_live_parameters", "stage3_max_live_parameters"},
        {"max_live_parameters", "stage3_max_live_parameters"},
        {"sub_group_size", "sub_group_size"}};
    for (const auto& kv : z) {
      const std::string key = kv.first.Scalar();
      const std::string path = "zero_optimization." + key;
      const YAML::Node& v = kv.second;
      if (key == "stage") {
        if (is_auto(v)) problem(path, v, "\"auto\" is not filled for the stage (as in HF); give 0, 1, 2 or 3");
        else place(path, v, "zero", "stage", v);
      } else if (key == "offload_optimizer" || key == "offload_param") {
        offload(key, v);
      } else if (key == "cpu_offload" || key == "cpu_offload_params") {  // DeepSpeed's deprecated booleans
        if (!is_auto(v) && v.IsScalar() && v.Scalar() == "true")
          place(path, v, "zero", key == "cpu_offload" ? "offload_optimizer" : "offload_param", YAML::Node("cpu"));
      } else if (auto s = stage3.find(key); s != stage3.end()) {
        if (!is_auto(v)) place(path, v, "zero", s->second, v);  // "auto": filled from the model at stage 3
      } else if (key == "reduce_bucket_size") {
        // Elements; converted to distributed.ddp_bucket_cap_mb once the gradient dtype is known.
      } else if ((key.find("gather_16bit_weights_on_model_save") != std::string::npos ||
                  key == "stage3_gather_fp16_weights_on_model_save") && !is_auto(v)) {
        place(path, v, "zero", "stage3_gather_16bit_weights_on_model_save", v);
      } else if (is_auto(v) && contains(known, key)) {
        note(path, "\"auto\" is not filled for this key (as in HF); DeepSpeed drops it and uses its default");
      } else {
        other(path, v, kZeroOthers, known);
      }
    }
  }

  // Keys of `section` (a DeepSpeed mapping) placed into the spec section `into`, or noted as hints.
  void place_keys(const std::string& section, const YAML::Node& v, const std::string& into,
                  const std::vector<std::string>& placed, const std::vector<std::pair<std::string, std::string>>& hints) {
    if (!expect_map(section, v)) return;
    std::vector<std::string> known = placed;
    for (const auto& h : hints) known.push_back(h.first);
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar(), path = section + "." + key;
      auto hint = std::find_if(hints.begin(), hints.end(), [&](const auto& h) { return h.first == key; });
      if (contains(placed, key)) place(path, kv.second, into, key, kv.second);
      else if (hint != hints.end()) note(path, hint->second);
      else unknown(path, key, kv.second, known);
    }
  }

  void offload(const std::string& which, const YAML::Node& v) {
    const std::string path = "zero_optimization." + which;
    if (which == "offload_optimizer") {
      // The spec's own `offload_optimizer: cpu` shorthand becomes {device: cpu}, so each key meets its match.
      YAML::Node zero = lookup(root_, "zero");
      if (YAML::Node own = lookup(zero, "offload_optimizer"); own.IsScalar()) {
        YAML::Node expanded(YAML::NodeType::Map);
        expanded["device"] = own;
        zero["offload_optimizer"] = expanded;
      }
      place_keys(path, v, "zero.offload_optimizer", kOffloadOptimizerKeys, kOffloadOptimizerHints);
      return;
    }
    if (!expect_map(path, v)) return;
    std::vector<std::string> known = {"device"};
    for (const auto& [key, why] : kOffloadParamHints) known.push_back(key);
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      auto hint = std::find_if(kOffloadParamHints.begin(), kOffloadParamHints.end(), [&](const auto& h) { return h.first == key; });
      if (key == "device") place(path + ".device", kv.second, "zero", which, kv.second);
      else if (hint != kOffloadParamHints.end()) note(path + "." + key, hint->second);
      else unknown(path + "." + key, key, kv.second, known);
    }
  }

  void aio(const YAML::Node& v) { place_keys("aio", v, "zero.aio", kAioKeys, kAioHints); }

  void fp16(const YAML::Node& v) {
    if (!expect_map("fp16", v)) return;
    const std::vector<std::string> known = {"enabled", "auto_cast", "fp16_master_weights_and_grads", "loss_scale",
                                            "initial_scale_power", "loss_scale_window", "hysteresis",
                                            "consecutive_hysteresis", "min_loss_scale"};
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      const std::string path = "fp16." + key;
      if (key == "enabled") continue;  // compared with precision.fp16 (HF's fp16)
      if (contains(kLossScalerKeys, key)) {
        if (is_auto(kv.second)) note(path, "\"auto\" is not filled for this key (as in HF); the documented default applies");
        else place(path, kv.second, "precision", key, kv.second);
      } else if (key == "auto_cast" || key == "fp16_master_weights_and_grads") {
        if (!same_yaml_value(kv.second, YAML::Node("false")))
          problem(path, kv.second, key == "auto_cast" ? "casting the model's inputs to fp16 is not available; remove it"
                                                       : "fp16 master weights are not available (the masters are fp32); remove it");
      } else {
        unknown(path, key, kv.second, known);
      }
    }
  }

  void bf16(const std::string& section, const YAML::Node& v) {
    if (!expect_map(section, v)) return;
    const std::vector<std::string> known = {"enabled", "immediate_grad_update", "check_grad_overflow",
                                            "bf16_master_weights_and_grads", "bf16_optimizer_states"};
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      const std::string path = section + "." + key;
      if (key == "enabled") continue;  // compared with precision.bf16 (HF's bf16)
      if (key == "immediate_grad_update" || key == "check_grad_overflow") note(path, "a DeepSpeed implementation choice");
      else if (contains(known, key)) {
        if (!same_yaml_value(kv.second, YAML::Node("false")))
          problem(path, kv.second, "16-bit master weights or optimizer state are not available (both are fp32); remove it");
      } else {
        unknown(path, key, kv.second, known);
      }
    }
  }

  void optimizer(const YAML::Node& v) {
    if (!expect_map("optimizer", v)) return;
    const YAML::Node type = lookup(v, "type");
    std::string ours;
    if (!type.IsDefined() || !type.IsScalar()) {
      problem("optimizer.type", type.IsDefined() ? type : v, "expected the optimizer's type, e.g. AdamW");
    } else if (auto it = kOptimizers.find(lower(type.Scalar())); it != kOptimizers.end()) {
      ours = it->second;
    } else if (contains(kUnavailableOptimizers, lower(type.Scalar()))) {
      problem("optimizer.type", type, "'" + type.Scalar() + "' is not available; use Adam, AdamW, Lion, SGD or Adagrad");
    } else {
      std::vector<std::string> known;
      for (const auto& [name, _] : kOptimizers) known.push_back(name);
      problem("optimizer.type", type, "'" + type.Scalar() + "' is not an optimizer hftrain runs" +
                                          did_you_mean(lower(type.Scalar()), known) + "; use Adam, AdamW, Lion, SGD or Adagrad");
    }
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      if (key != "type" && key != "params") unknown("optimizer." + key, key, kv.second, {"type", "params"});
    }
    const YAML::Node params = lookup(v, "params");
    std::string placed_type = ours;
    if (!ours.empty() && params.IsDefined() && expect_map("optimizer.params", params)) {
      std::vector<std::string> known = kMatchedOptimizerParams;
      const auto& own = kOptimizerParams.at(ours);
      known.insert(known.end(), own.begin(), own.end());
      for (const auto& kv : params) {
        const std::string key = kv.first.Scalar();
        const std::string path = "optimizer.params." + key;
        const YAML::Node& p = kv.second;
        if (contains(kMatchedOptimizerParams, key)) continue;  // compared with TrainingArguments
        if (!contains(known, key)) {
          unknown(path, key, p, known);
        } else if (key == "adam_w_mode") {
          if (same_yaml_value(p, YAML::Node("false"))) placed_type = "adam";  // DeepSpeed Adam: L2 decay in the gradient
        } else if (key == "torch_adam" || key == "fused" || key == "foreach") {
          note(path, "an implementation choice; hftrain's update is one vectorised pass");
        } else if (key == "bias_correction") {
          if (!same_yaml_value(p, YAML::Node("true"))) problem(path, p, "Adam without bias correction is not available");
        } else if (key == "amsgrad") {
          if (!same_yaml_value(p, YAML::Node("false"))) problem(path, p, "AMSGrad is not available");
        } else {
          place(path, p, "optimizer", key, p);  // sgd momentum / dampening / nesterov, adagrad options
        }
      }
    }
    // Adagrad takes eps as its own option (torch's default 1e-10); "auto" is HF's adam_epsilon.
    if (placed_type == "adagrad") {
      if (YAML::Node eps = lookup(params, "eps"); eps.IsDefined()) {
        const YAML::Node adam_epsilon = lookup(lookup(root_, "training"), "adam_epsilon");
        place("optimizer.params.eps", eps, "optimizer", "eps",
              !is_auto(eps) ? eps : adam_epsilon.IsDefined() ? adam_epsilon : YAML::Node("1e-8"));
      }
    }
    if (!placed_type.empty()) place("optimizer.type", type, "optimizer", "type", YAML::Node(placed_type));
  }

  void scheduler(const YAML::Node& v) {
    if (!expect_map("scheduler", v)) return;
    const YAML::Node type = lookup(v, "type");
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      if (key != "type" && key != "params") unknown("scheduler." + key, key, kv.second, {"type", "params"});
    }
    if (!type.IsDefined() || !type.IsScalar()) {
      problem("scheduler.type", type.IsDefined() ? type : v, "expected the scheduler's type, e.g. WarmupLR");
      return;
    }
    const std::string t = type.Scalar();
    auto known = kSchedulerParams.find(t);
    if (known == kSchedulerParams.end()) {
      const bool deepspeed_name = t == "OneCycle" || t == "LRRangeTest";
      problem("scheduler.type", type,
              "'" + t + "' " + (deepspeed_name ? "has no equivalent in hftrain yet" : "is not a DeepSpeed scheduler") +
                  did_you_mean(t, {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"}) +
                  "; use WarmupLR, WarmupDecayLR or WarmupCosineLR, or remove the scheduler section and set an HF "
                  "schedule (training.lr_scheduler_type, e.g. cosine or cosine_with_min_lr)");
      return;
    }
    place("scheduler.type", type, "scheduler", "type", type);
    const YAML::Node params = lookup(v, "params");
    if (!params.IsDefined() || !expect_map("scheduler.params", params)) return;
    for (const auto& kv : params) {
      const std::string key = kv.first.Scalar();
      const std::string path = "scheduler.params." + key;
      const YAML::Node& p = kv.second;
      if (!contains(known->second, key)) {
        unknown(path, key, p, known->second);
      } else if (key == "warmup_max_lr") {
        // compared with training.learning_rate; the schedule's default is that value
      } else if (key == "last_batch_iteration") {
        if (!same_yaml_value(p, YAML::Node("-1")))
          problem(path, p, "starting the schedule part-way is not available; resume from a checkpoint instead");
      } else if (!is_auto(p)) {
        place(path, p, "scheduler", key, p);  // warmup/total steps are checked against the run at train start
      }
    }
  }

  void communication_data_type(const YAML::Node& v) {
    if (v.IsNull()) return;
    const std::string t = v.IsScalar() ? lower(v.Scalar()) : "";
    if (t == "fp32" || t == "float32") {
      place("communication_data_type", v, "zero", "reduce_dtype", YAML::Node("fp32"));
    } else if (t == "fp16" || t == "bf16" || t == "bfloat16" || t == "float16") {
      note("communication_data_type", "gradients are reduced in the parameters' dtype, which is what this asks for "
                                       "when it matches precision.bf16 / fp16");
    } else {
      problem("communication_data_type", v, "expected fp32, fp16, bf16 or null");
    }
  }

  YAML::Node& root_;
  Issues& issues_;
  Issues& file_;
  std::map<std::string, std::string>& origins_;
  std::vector<std::string>& notes_;
  DeepSpeedConfig& out_;
};

// The DeepSpeed value at a dotted path of the written config (null when absent).
json at_path(const json& config, const std::string& dotted) {
  const json* j = &config;
  std::size_t pos = 0;
  while (pos <= dotted.size()) {
    const std::size_t end = std::min(dotted.find('.', pos), dotted.size());
    const std::string part = dotted.substr(pos, end - pos);
    if (!j->is_object() || !j->contains(part)) return nullptr;
    j = &(*j)[part];
    pos = end + 1;
  }
  return *j;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

bool same(const json& ds, const json& hf) {
  if (ds.is_number() && hf.is_number()) return ds.get<double>() == hf.get<double>();
  if (ds.is_array() && hf.is_array()) {
    if (ds.size() != hf.size()) return false;
    for (std::size_t i = 0; i < ds.size(); ++i)
      if (!same(ds[i], hf[i])) return false;
    return true;
  }
  return ds == hf;
}

// A DeepSpeed value HF fills from a TrainingArguments value ("auto") or requires to match it.
struct HfMatch {
  std::string ds_key;
  std::string hf_key;
  json hf_value;
};

std::vector<HfMatch> spec_matches(const RunSpec& spec) {
  const TrainingArgs& t = spec.training;
  return {{"train_micro_batch_size_per_gpu", "per_device_train_batch_size", t.per_device_train_batch_size},
          {"gradient_accumulation_steps", "gradient_accumulation_steps", t.gradient_accumulation_steps},
          {"gradient_clipping", "max_grad_norm", t.max_grad_norm},
          {"optimizer.params.lr", "learning_rate", t.learning_rate},
          {"optimizer.params.betas", "adam_beta1, adam_beta2", json::array({t.adam_beta1, t.adam_beta2})},
          {"optimizer.params.eps", "adam_epsilon", t.adam_epsilon},
          {"optimizer.params.weight_decay", "weight_decay", t.weight_decay},
          {"scheduler.params.warmup_max_lr", "learning_rate", t.learning_rate},
          {"fp16.enabled", "fp16|fp16_full_eval", spec.precision.fp16 || t.fp16_full_eval},
          {"bf16.enabled", "bf16|bf16_full_eval", spec.precision.bf16 || t.bf16_full_eval}};
}

std::vector<HfMatch> run_matches(const RunSpec& spec, int64_t world_size, int64_t total_steps, int64_t warmup_steps) {
  const TrainingArgs& t = spec.training;
  std::vector<HfMatch> m = {{"train_batch_size", "world_size*per_device_train_batch_size*gradient_accumulation_steps",
                             world_size * t.per_device_train_batch_size * t.gradient_accumulation_steps}};
  if (total_steps >= 0) m.push_back({"scheduler.params.total_num_steps", "num_training_steps (calculated)", total_steps});
  if (warmup_steps >= 0) m.push_back({"scheduler.params.warmup_num_steps", "warmup_steps (calculated)", warmup_steps});
  return m;
}

// Where a DeepSpeed key was written (file:line:col), or the config's source.
std::string location(const DeepSpeedConfig& ds, const std::string& key) {
  auto it = ds.locations.find(key);
  if (it == ds.locations.end() && key.rfind("bf16.", 0) == 0) it = ds.locations.find("bfloat16" + key.substr(4));
  return it != ds.locations.end() ? it->second : ds.source;
}

// HF's mismatch line: "ds KEY=V vs hf KEY=V".
std::string mismatch(const HfMatch& m, const json& v) {
  return "ds " + m.ds_key + "=" + v.dump() + " vs hf " + m.hf_key + "=" + m.hf_value.dump() +
         " (set it to \"auto\" to take the TrainingArguments value, or make them equal)";
}

json value_for(const json& config, const std::string& key) {
  json v = at_path(config, key);
  if (v.is_null() && key.rfind("bf16.", 0) == 0) v = at_path(config, "bfloat16" + key.substr(4));
  return v;
}

void set_path(json& config, const std::string& dotted, const json& value) {
  json* j = &config;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = dotted.find('.', pos);
    if (end == std::string::npos) {
      (*j)[dotted.substr(pos)] = value;
      return;
    }
    j = &(*j)[dotted.substr(pos, end - pos)];
    pos = end + 1;
  }
}

int64_t gradient_bytes(const RunSpec& spec) { return spec.precision.bf16 || spec.precision.fp16 ? 2 : 4; }

}  // namespace

void apply_deepspeed_config(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                            std::vector<std::string>& notes, DeepSpeedConfig& out) {
  YAML::Node training = lookup(root, "training");
  const YAML::Node setting = lookup(training, "deepspeed");
  if (!setting.IsDefined() || setting.IsNull()) {
    if (setting.IsDefined()) training.remove("deepspeed");
    return;
  }
  YAML::Node config;
  std::unique_ptr<Issues> file_issues;
  if (setting.IsMap()) {
    config = setting;
    out.source = "training.deepspeed";
  } else if (setting.IsScalar() && !setting.Scalar().empty()) {
    namespace fs = std::filesystem;
    fs::path path = setting.Scalar();
    // A relative path is taken from the current directory (as HF does), else next to the spec.
    if (path.is_relative() && !fs::exists(path)) {
      const fs::path beside = fs::path(issues.file()).parent_path() / path;
      if (fs::exists(beside)) path = beside;
    }
    if (!fs::is_regular_file(path)) {
      issues.add("training.deepspeed", setting, "cannot read DeepSpeed config '" + setting.Scalar() + "': no such file");
      training.remove("deepspeed");
      return;
    }
    out.source = path.string();
    try {
      config = YAML::Load(read_text_file(out.source));
    } catch (const YAML::ParserException& e) {
      issues.add("training.deepspeed", setting,
                 out.source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": not valid JSON: " + e.msg);
      training.remove("deepspeed");
      return;
    }
    file_issues = std::make_unique<Issues>(out.source);
  } else {
    issues.add("training.deepspeed", setting, "expected the path of a DeepSpeed JSON config, or its mapping");
    training.remove("deepspeed");
    return;
  }
  Issues& located = file_issues ? *file_issues : issues;
  if (!config.IsMap()) {
    located.add("", config, "a DeepSpeed config must be a JSON object of settings");
  } else {
    if (file_issues) report_duplicate_keys(config, "", located);
    out.written_json = to_json(config).dump();
    DeepSpeedReader(root, issues, located, origins, notes, out).read(config);
  }
  if (file_issues) issues.absorb(*file_issues);
  training.remove("deepspeed");
}

int64_t model_hidden_size(const RunSpec& spec, const ComponentCatalog& catalog) {
  if (spec.model.type.empty()) return 0;
  const YAML::Node options = catalog.models.dump(spec.model.type, spec.model.options);
  for (const char* key : {"hidden_size", "n_embd", "d_model"})
    if (YAML::Node v = lookup(options, key); v.IsScalar()) return v.as<int64_t>();
  int64_t largest = 0;
  if (YAML::Node sizes = lookup(options, "hidden_sizes"); sizes.IsSequence())
    for (const auto& s : sizes) largest = std::max(largest, s.as<int64_t>());
  return largest;
}

void finish_deepspeed_config(RunSpec& spec, const ComponentCatalog& catalog, Issues& issues) {
  const DeepSpeedConfig& ds = spec.deepspeed;
  if (!ds.present() || ds.written_json.empty()) return;
  const json config = json::parse(ds.written_json);
  auto report = [&](const std::string& key, const std::string& message) {
    issues.add_at(location(ds, key), "training.deepspeed " + key, message);
  };
  for (const HfMatch& m : spec_matches(spec)) {
    const json v = value_for(config, m.ds_key);
    if (!v.is_null() && !is_auto(v) && !same(v, m.hf_value)) report(m.ds_key, mismatch(m, v));
  }
  const int64_t hidden = model_hidden_size(spec, catalog);
  auto needs_hidden = [&](const std::string& key) {
    if (hidden > 0) return true;
    report(key, "\"auto\" is filled from the model's hidden size (as HF does), and model '" + spec.model.type +
                    "' has none; give a number");
    return false;
  };
  const json bucket = at_path(config, "zero_optimization.reduce_bucket_size");
  if (!bucket.is_null()) {
    double elements = 0;
    if (is_auto(bucket)) {
      if (needs_hidden("zero_optimization.reduce_bucket_size")) elements = static_cast<double>(hidden) * hidden;
    } else if (bucket.is_number() && bucket.get<double>() > 0) {
      elements = bucket.get<double>();
    } else {
      report("zero_optimization.reduce_bucket_size", "expected a positive number of elements or \"auto\"");
    }
    if (elements > 0) {
      if (spec.origins.count("distributed.ddp_bucket_cap_mb")) {
        report("zero_optimization.reduce_bucket_size",
               "and distributed.ddp_bucket_cap_mb (" + spec.origins.at("distributed.ddp_bucket_cap_mb") +
                   ") both set the gradient bucket size; give only one");
      } else {
        spec.distributed.ddp_bucket_cap_mb = elements * static_cast<double>(gradient_bytes(spec)) / (1024.0 * 1024.0);
        spec.origins["distributed.ddp_bucket_cap_mb"] =
            "training.deepspeed zero_optimization.reduce_bucket_size: " + std::to_string(static_cast<int64_t>(elements)) +
            " elements (" + ds.locations.at("zero_optimization.reduce_bucket_size") + ")";
      }
    }
  }
  if (spec.zero.stage == 3) {  // HF fills these two only for ZeRO-3
    const std::map<std::string, std::string> aliases = {
        {"stage3_prefetch_bucket_size", "prefetch_bucket_size"},
        {"stage3_param_persistence_threshold", "param_persistence_threshold"}};
    for (const auto& [key, alias] : aliases) {
      std::string path = "zero_optimization." + key;
      json v = at_path(config, path);
      if (v.is_null()) v = at_path(config, path = "zero_optimization." + alias);
      if (!is_auto(v) || !needs_hidden(path)) continue;
      const double h = static_cast<double>(hidden);
      if (key == "stage3_prefetch_bucket_size") spec.zero.stage3_prefetch_bucket_size = static_cast<int64_t>(0.9 * h * h);
      else spec.zero.stage3_param_persistence_threshold = 10 * hidden;
      spec.origins["zero." + key] = "training.deepspeed " + path + ": \"auto\" (" + ds.locations.at(path) + ")";
    }
  }
}

std::string resolve_deepspeed_config(const RunSpec& spec, int64_t world_size, int64_t total_steps, int64_t warmup_steps) {
  const DeepSpeedConfig& ds = spec.deepspeed;
  json config = json::parse(ds.written_json.empty() ? "{}" : ds.written_json);
  std::vector<std::string> problems;
  for (const HfMatch& m : run_matches(spec, world_size, total_steps, warmup_steps)) {
    const json v = value_for(config, m.ds_key);
    if (!v.is_null() && !is_auto(v) && !same(v, m.hf_value))
      problems.push_back(location(ds, m.ds_key) + ": training.deepspeed " + m.ds_key + ": " + mismatch(m, v));
  }
  if (!problems.empty()) {
    std::string text = "invalid DeepSpeed config (" + std::to_string(problems.size()) + " value" +
                       (problems.size() == 1 ? "" : "s") + " disagreeing with the run, as HF reports them):";
    for (const auto& p : problems) text += "\n  " + p;
    throw ConfigError(text);
  }
  // Every "auto" HF fills, with the value this run uses.
  std::vector<HfMatch> fills = spec_matches(spec);
  for (const auto& m : run_matches(spec, world_size, total_steps, warmup_steps)) fills.push_back(m);
  fills.push_back({"scheduler.params.warmup_min_lr", "", 0});
  const int64_t bucket_elements =
      static_cast<int64_t>(spec.distributed.ddp_bucket_cap_mb * 1024 * 1024 / static_cast<double>(gradient_bytes(spec)));
  fills.push_back({"zero_optimization.reduce_bucket_size", "", bucket_elements});
  fills.push_back({"zero_optimization.stage3_prefetch_bucket_size", "", spec.zero.stage3_prefetch_bucket_size});
  fills.push_back({"zero_optimization.stage3_param_persistence_threshold", "", spec.zero.stage3_param_persistence_threshold});
  fills.push_back({"zero_optimization.stage3_max_live_parameters", "", spec.zero.stage3_max_live_parameters});
  for (const auto& m : fills) {
    std::string key = m.ds_key;
    if (key.rfind("bf16.", 0) == 0 && at_path(config, key).is_null()) key = "bfloat16" + key.substr(4);
    if (is_auto(at_path(config, key))) set_path(config, key, m.hf_value);
  }
  // Other "auto" values inside zero_optimization: DeepSpeed drops them and uses its defaults.
  if (config.contains("zero_optimization") && config["zero_optimization"].is_object()) {
    json& z = config["zero_optimization"];
    for (auto it = z.begin(); it != z.end();) it = is_auto(*it) ? z.erase(it) : std::next(it);
  }
  return config.dump(4) + "\n";
}

}  // namespace hftrain
