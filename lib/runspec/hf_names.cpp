// HF TrainingArguments names for the optimizer and schedule sections (see hf_names.h).
#include "runspec/hf_names.h"

#include <algorithm>
#include <sstream>

#include "runspec/hf_long_context.h"

namespace hftrain {
namespace {

// HF `optim` values whose update hftrain runs, and the hftrain optimizer type that runs it. The fused /
// apex / hf variants are the same AdamW update (hftrain's is already one fused pass on the CPU).
struct HfOptimizer {
  std::string hf_name;
  std::string type;
};
const std::vector<HfOptimizer> kHfOptimizers = {
    {"adamw_torch", "adamw"}, {"adamw_torch_fused", "adamw"}, {"adamw_hf", "adamw"}, {"adamw_apex_fused", "adamw"},
    {"adafactor", "adafactor"}, {"sgd", "sgd"},                 {"lion_32bit", "lion"},
    {"adagrad", "adagrad"},
    {"adamw_8bit", "adamw_8bit"}, {"adamw_bnb_8bit", "adamw_8bit"},
    {"galore_adamw", "galore_adamw"}, {"galore_adamw_8bit", "galore_adamw_8bit"}, {"galore_adafactor", "galore_adafactor"},
    {"galore_adamw_layerwise", "galore_adamw_layerwise"}, {"galore_adamw_8bit_layerwise", "galore_adamw_8bit_layerwise"},
    {"galore_adafactor_layerwise", "galore_adafactor_layerwise"},
    {"lomo", "lomo"}, {"adalomo", "adalomo"},
};

class Mover;
// One HF name: the section it moves to, its help, and the Mover step that moves it.
struct HfName {
  std::string name;
  std::string section;
  std::string help;
  void (Mover::*move)(const HfName&, const YAML::Node&);
  std::string key = "";          // renamed: the section key it is now
  std::string deprecation = "";  // renamed: HF's deprecation warning, logged at start
  std::string absent = "";       // renamed: the old name's value that HF takes as not given (no_cuda: false)
  void (*delegate)(const HfFieldTarget&, const YAML::Node&) = nullptr;  // delegated: the mapping in its own file
};

// Whether the value at `path` / `node` was written on the command line (--set, or a flag turned into one).
bool from_command_line(const Issues& issues, const std::string& path, const YAML::Node& node) {
  return issues.where(path, node).rfind("--set", 0) == 0;
}

// The words of an HF option list: a YAML list, or one string with the words separated by spaces (as HF's
// command line gives them).
std::vector<std::string> option_words(const YAML::Node& v) {
  std::vector<std::string> words;
  if (v.IsSequence()) {
    for (const auto& item : v) words.push_back(yaml_text(item));
  } else if (v.IsScalar()) {
    std::istringstream in(v.Scalar());
    for (std::string w; in >> w;) words.push_back(w);
  }
  return words;
}

std::vector<std::string> hf_optimizer_names() {
  std::vector<std::string> out;
  for (const auto& o : kHfOptimizers) out.push_back(o.hf_name);
  return out;
}

class Mover {
 public:
  Mover(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins, std::vector<std::string>& notes)
      : root_(root), issues_(issues), origins_(origins), notes_(notes) {}

  // Puts `value` at section.key, written as training.<hf_name> (`hf_node` locates it).
  void place(const HfName& hf, const YAML::Node& hf_node, const std::string& key, const YAML::Node& value,
             const std::string& shown) {
    place_setting(root_, issues_, origins_, hf.section, key, value, shown, SettingSource{"training." + hf.name, hf_node, issues_});
  }

  void optim(const HfName& hf, const YAML::Node& v) {
    if (!v.IsScalar()) {
      issues_.add("training.optim", v, "expected an HF optimizer name such as adamw_torch");
      return;
    }
    for (const auto& o : kHfOptimizers) {
      if (o.hf_name == v.Scalar()) {
        place(hf, v, "type", YAML::Node(o.type), v.Scalar());
        return;
      }
    }
    std::string list;
    for (const auto& o : kHfOptimizers) list += (list.empty() ? "" : ", ") + o.hf_name;
    issues_.add("training.optim", v,
                "'" + v.Scalar() + "' is not an HF optimizer hftrain runs" + did_you_mean(v.Scalar(), hf_optimizer_names()) +
                    "; it runs: " + list + " (or set optimizer.type; `hftrain components` lists them)");
  }

  // HF optim_args: "k1=v1,k2=v2" (spaces removed, as HF does; values typed as YAML, Python's None = null).
  void optim_args(const HfName& hf, const YAML::Node& v) {
    if (v.IsMap()) {
      for (const auto& kv : v) place(hf, kv.second, kv.first.Scalar(), kv.second, kv.first.Scalar() + "=" + yaml_text(kv.second));
      return;
    }
    if (!v.IsScalar()) {
      issues_.add("training.optim_args", v, "expected 'key=value,key=value' (or a mapping)");
      return;
    }
    std::string text;
    for (char c : v.Scalar())
      if (c != ' ') text += c;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find(',', pos);
      if (end == std::string::npos) end = text.size();
      const std::string item = text.substr(pos, end - pos);
      pos = end + 1;
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        issues_.add("training.optim_args", v, "'" + item + "' is not key=value");
        continue;
      }
      const std::string raw = item.substr(eq + 1);
      YAML::Node value;
      if (raw == "None") {
        value = YAML::Node(YAML::NodeType::Null);
      } else {
        try {
          value = YAML::Load(raw);
        } catch (const YAML::Exception&) {
          value = YAML::Node(raw);
        }
        if (!value.IsScalar()) value = YAML::Node(raw);
      }
      place(hf, v, item.substr(0, eq), value, item);
    }
  }

  void lr_scheduler_type(const HfName& hf, const YAML::Node& v) {
    if (!v.IsScalar()) {
      issues_.add("training.lr_scheduler_type", v, "expected a schedule name such as linear or cosine");
      return;
    }
    place(hf, v, "type", v, v.Scalar());  // HF's names are hftrain's; scheduler.type validates it
  }

  // An old TrainingArguments name of a setting that HF renamed (per_gpu_train_batch_size ->
  // per_device_train_batch_size): taken as the new name, with HF's deprecation warning logged at start.
  void renamed(const HfName& hf, const YAML::Node& v) {
    if (!hf.absent.empty() && v.IsScalar() && same_yaml_value(v, YAML::Node(hf.absent))) return;
    place(hf, v, hf.key, v, yaml_text(v));
    if (!hf.deprecation.empty())
      notes_.push_back("training." + hf.name + ": " + hf.deprecation + " (taken as " + hf.section + "." + hf.key + ")");
  }

  // transformers v5's train_sampling_strategy: random and group_by_length are training.group_by_length false and
  // true; sequential (no shuffle) is not built.
  void train_sampling_strategy(const HfName& hf, const YAML::Node& v) {
    const std::vector<std::string> built = {"random", "group_by_length"};
    if (v.IsScalar() && std::find(built.begin(), built.end(), v.Scalar()) != built.end())
      return place(hf, v, "group_by_length", YAML::Node(v.Scalar() == "group_by_length"), v.Scalar());
    issues_.add("training.train_sampling_strategy", v,
                "'" + yaml_text(v) + "' is not available" + did_you_mean(yaml_text(v), built) +
                    ": the training order is the seeded shuffle (random) or HF's length grouping (group_by_length)");
  }

  // A field whose mapping lives in a file of its own (hf_long_context).
  void delegated(const HfName& hf, const YAML::Node& v) { hf.delegate(HfFieldTarget{root_, issues_, origins_, notes_, hf.name}, v); }

  // A TrainingArguments flag that is the option of the same name in another section (bf16 -> precision.bf16).
  void same_name(const HfName& hf, const YAML::Node& v) { place(hf, v, hf.name, v, yaml_text(v)); }

  // HF fsdp: "full_shard" / "shard_grad_op" / "no_shard" with optional "auto_wrap" and "offload"
  // (space-separated, or a list): the ZeRO stage that shards the same state.
  void fsdp(const HfName& hf, const YAML::Node& v) {
    const std::vector<std::string> words = option_words(v);
    if (words.empty()) return;  // "" = no FSDP (HF's default)
    if (stage_written_too(hf, v)) return;
    const std::vector<std::string> known = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2",
                                            "offload", "auto_wrap"};
    for (const std::string& w : words) {
      if (std::optional<int> stage = fsdp_sharding_stage(w)) {
        place(hf, v, "stage", YAML::Node(*stage), w);
      } else if (w == "offload") {
        place(hf, v, "offload_param", YAML::Node("cpu"), w);
      } else if (w == "auto_wrap") {
        // hftrain always gathers per transformer block (the model's gather units): what auto_wrap selects.
      } else if (w == "hybrid_shard" || w == "hybrid_shard_zero2") {
        issues_.add("training.fsdp", v, "'" + w + "' (sharding within a node, replication across nodes) has no equivalent "
                                        "in hftrain; use full_shard or shard_grad_op");
      } else {
        issues_.add("training.fsdp", v, "'" + w + "' is not an FSDP option" + did_you_mean(w, known) + " (" +
                                            "full_shard, shard_grad_op, no_shard, offload, auto_wrap)");
      }
    }
  }

  // HF sharded_ddp (FairScale, transformers 4.x): "simple" (OSS + ShardedDDP) and "zero_dp_2" shard the
  // optimizer state and gradients = ZeRO stage 2, "zero_dp_3" also the parameters = stage 3; "offload" (or
  // "cpu_offload") = the CPU offload that stage has; "auto_wrap" = what hftrain does. HF's own rules for
  // combining them, and its refusal of sharded_ddp together with fsdp or deepspeed, hold.
  void sharded_ddp(const HfName& hf, const YAML::Node& v) {
    const std::vector<std::string> words = option_words(v);
    if (words.empty()) return;  // "" / [] = no sharded DDP (HF's default)
    const std::string text = yaml_text(v);
    const YAML::Node training = lookup(root_, "training");
    for (const char* other : {"fsdp", "deepspeed"}) {
      const YAML::Node o = lookup(training, other);
      if (o.IsDefined() && !o.IsNull() && (!option_words(o).empty() || (o.IsMap() && o.size() > 0)))
        issues_.add("training.sharded_ddp", v,
                    "'" + text + "' and training." + other + " (" + issues_.where(std::string("training.") + other, o) +
                        ") are both given; HF refuses them together (\"Using --sharded_ddp xxx together with --" + other +
                        " is not possible, deactivate one of those flags.\"): give only one");
    }
    bool simple = false, dp2 = false, dp3 = false, offload = false;
    const std::vector<std::string> known = {"simple", "zero_dp_2", "zero_dp_3", "offload", "cpu_offload", "auto_wrap"};
    for (const std::string& w : words) {
      if (w == "simple") simple = true;
      else if (w == "zero_dp_2") dp2 = true;
      else if (w == "zero_dp_3") dp3 = true;
      else if (w == "offload" || w == "cpu_offload") offload = true;
      else if (w != "auto_wrap")  // hftrain gathers per transformer block: what FairScale's auto_wrap selects
        issues_.add("training.sharded_ddp", v, "'" + w + "' is not a sharded_ddp option" + did_you_mean(w, known) +
                                                   " (simple, zero_dp_2, zero_dp_3, offload, auto_wrap)");
    }
    // HF TrainingArguments' checks, in its words.
    if (simple && words.size() > 1)
      return issues_.add("training.sharded_ddp", v, "'" + text + "': `--sharded_ddp simple` is not compatible with any other option (HF)");
    if (dp2 && dp3)
      return issues_.add("training.sharded_ddp", v,
                         "'" + text + "': `--sharded_ddp zero_dp_2` is not compatible with `--sharded_ddp zero_dp_3` (HF)");
    if (offload && !dp2 && !dp3)
      return issues_.add("training.sharded_ddp", v,
                         "'" + text + "': `--sharded_ddp offload` can't work on its own. It needs to be added to "
                                      "`--sharded_ddp zero_dp_2` or `--sharded_ddp zero_dp_3` (HF)");
    if (!simple && !dp2 && !dp3) return;  // an unknown word, reported above
    if (stage_written_too(hf, v)) return;
    const int stage = dp3 ? 3 : 2;
    place(hf, v, "stage", YAML::Node(stage), text);
    std::string became = "zero.stage " + std::to_string(stage);
    if (offload) {
      place(HfName{hf.name, "zero.offload_optimizer", hf.help, hf.move}, v, "device", YAML::Node("cpu"), text);
      became += ", zero.offload_optimizer cpu";
      if (stage == 3) {
        place(hf, v, "offload_param", YAML::Node("cpu"), text);
        became += ", zero.offload_param cpu";
      }
    }
    notes_.push_back("training.sharded_ddp '" + text + "' (FairScale) is " + became + " here");
  }

  // HF fsdp_config (a mapping or its JSON text; keys with or without the "fsdp_" prefix, as HF strips it).
  void fsdp_config(const HfName& hf, const YAML::Node& v) {
    YAML::Node map = v;
    if (v.IsScalar()) {
      try {
        map = YAML::Load(v.Scalar());
      } catch (const YAML::Exception& e) {
        issues_.add("training.fsdp_config", v, "not a mapping (a path to a JSON file is not read; inline it): " + e.msg);
        return;
      }
    }
    if (!map.IsMap()) {
      issues_.add("training.fsdp_config", v, "expected a mapping of FSDP settings");
      return;
    }
    // Settings the engine's design already satisfies: the gather unit is the transformer block, prefetching
    // happens in forward and backward, gathers are bounded by zero.stage3_max_live_parameters, rank 0's
    // initial weights are broadcast, and parameters keep their names.
    const std::vector<std::string> satisfied = {"min_num_params", "transformer_layer_cls_to_wrap", "auto_wrap_policy",
                                                "forward_prefetch", "limit_all_gathers", "sync_module_states",
                                                "use_orig_params"};
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      if (key.rfind("fsdp_", 0) == 0) key = key.substr(5);
      const YAML::Node located = v.IsMap() ? kv.second : v;
      const std::string shown = key + ": " + yaml_text(kv.second);
      if (key == "activation_checkpointing") {
        place(HfName{hf.name, "training", hf.help, hf.move}, located, "gradient_checkpointing", kv.second, shown);
      } else if (key == "offload_params") {
        if (kv.second.IsScalar() && kv.second.as<std::string>() != "false")
          place(HfName{hf.name, "zero", hf.help, hf.move}, located, "offload_param", YAML::Node("cpu"), shown);
      } else if (key == "backward_prefetch") {
        if (yaml_text(kv.second) == "NO_PREFETCH" || yaml_text(kv.second) == "no_prefetch")
          place(HfName{hf.name, "zero", hf.help, hf.move}, located, "stage3_prefetch_bucket_size", YAML::Node(0), shown);
      } else if (key == "xla" || key == "xla_fsdp_v2" || key == "xla_fsdp_grad_ckpt") {
        if (!kv.second.IsNull() && !same_yaml_value(kv.second, YAML::Node("false")))
          issues_.add("training.fsdp_config." + key, located, "'" + shown + "': XLA (TPU) FSDP is not available; false asks for nothing");
      } else if (key == "cpu_ram_efficient_loading") {  // FSDP's sharded loading = zero.Init here
        place(HfName{hf.name, "zero", hf.help, hf.move}, located, "zero3_init_flag", kv.second, shown);
      } else if (std::find(satisfied.begin(), satisfied.end(), key) == satisfied.end()) {
        issues_.add("training.fsdp_config." + key, located, "'" + key + "' has no equivalent in hftrain" +
                                                                 did_you_mean(key, satisfied));
      }
    }
  }

  // HF lr_scheduler_kwargs: a mapping, or its JSON text (as the HF command line passes it).
  void lr_scheduler_kwargs(const HfName& hf, const YAML::Node& v) {
    YAML::Node map = v;
    if (v.IsScalar()) {
      try {
        map = v.Scalar().empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(v.Scalar());
      } catch (const YAML::Exception& e) {
        issues_.add("training.lr_scheduler_kwargs", v, "not a mapping: " + e.msg);
        return;
      }
    }
    if (map.IsNull()) return;
    if (!map.IsMap()) {
      issues_.add("training.lr_scheduler_kwargs", v, "expected a mapping of schedule options");
      return;
    }
    for (const auto& kv : map) {
      const YAML::Node located = v.IsMap() ? kv.second : v;
      place(hf, located, kv.first.Scalar(), kv.second, kv.first.Scalar() + ": " + yaml_text(kv.second));
    }
  }

 private:
  // zero.stage is written besides `hf` (fsdp / sharded_ddp), which also chooses how the state is sharded.
  // With one of them on the command line and the other in the file, the command line wins (place() keeps
  // it): false. Both in the file, or both on the command line: a conflict naming both, true.
  bool stage_written_too(const HfName& hf, const YAML::Node& v) {
    const YAML::Node stage = lookup(lookup(root_, "zero"), "stage");
    if (!stage.IsDefined()) return false;
    const std::string written = "training." + hf.name;
    if (from_command_line(issues_, written, v) != from_command_line(issues_, "zero.stage", stage)) return false;
    issues_.add(written, v, "'" + yaml_text(v) + "' and zero.stage (" + issues_.where("zero.stage", stage) +
                                ") both choose how the training state is sharded; give only one");
    return true;
  }

  YAML::Node& root_;
  Issues& issues_;
  std::map<std::string, std::string>& origins_;
  std::vector<std::string>& notes_;
};

// Long-context training (hf_long_context); ALST's (ArcticTraining's) names for the same settings.
std::vector<HfName> long_context_names() {
  return {
      {"gradient_checkpointing_kwargs", "training",
       "HF checkpointing options: offload = training.gradient_checkpointing_offload; use_reentrant, preserve_rng_state "
       "true, determinism_check, debug false ask for nothing; others are refused.",
       &Mover::delegated, "", "", "", &move_gradient_checkpointing_kwargs},
      {"parallelism_config", "distributed",
       "Accelerate's ParallelismConfig: sp_size = distributed.sequence_parallel_size (sp_backend deepspeed); "
       "dp_replicate_size, tp_size, cp_size other than 1 are refused.",
       &Mover::delegated, "", "", "", &move_parallelism_config},
      {"activation_checkpoint_cpu_offload", "training",
       "ALST's name (ArcticTraining) of training.gradient_checkpointing_offload.", &Mover::renamed,
       "gradient_checkpointing_offload"},
      {"tiled_mlp_compute", "training", "ALST's name (ArcticTraining) of training.tiled_mlp.", &Mover::renamed, "tiled_mlp"},
  };
}

const std::vector<HfName>& hf_names() {
  static const std::vector<HfName> names = [] {
    std::string optims;
    for (const auto& o : kHfOptimizers) optims += (optims.empty() ? "" : ", ") + o.hf_name + " -> " + o.type;
    std::vector<HfName> all{
        {"optim", "optimizer", "HF optimizer name, the same setting as optimizer.type: " + optims + ".", &Mover::optim},
        {"optim_args", "optimizer", "HF optimizer arguments 'k1=v1,k2=v2' (or a mapping): the same settings as optimizer.<k>.",
         &Mover::optim_args},
        {"lr_scheduler_type", "scheduler", "HF schedule name, the same setting as scheduler.type.", &Mover::lr_scheduler_type},
        {"lr_scheduler_kwargs", "scheduler",
         "HF schedule arguments as a mapping (or its JSON text): the same settings as scheduler.<k>.",
         &Mover::lr_scheduler_kwargs},
        {"ddp_backend", "distributed", "HF ddp_backend: the same setting as distributed.backend (gloo; nccl needs CUDA).",
         &Mover::renamed, "backend"},
        {"per_gpu_train_batch_size", "training", "Deprecated HF name of per_device_train_batch_size.", &Mover::renamed,
         "per_device_train_batch_size",
         "HF: \"Using deprecated `--per_gpu_train_batch_size` argument which will be removed in a future version. Using "
         "`--per_device_train_batch_size` is preferred.\""},
        {"per_gpu_eval_batch_size", "training", "Deprecated HF name of per_device_eval_batch_size.", &Mover::renamed,
         "per_device_eval_batch_size",
         "HF: \"Using deprecated `--per_gpu_eval_batch_size` argument which will be removed in a future version. Using "
         "`--per_device_eval_batch_size` is preferred.\""},
        {"evaluation_strategy", "training", "Old HF name of eval_strategy (removed in transformers 4.46).", &Mover::renamed,
         "eval_strategy", "HF: \"`evaluation_strategy` is deprecated and will be removed in version 4.46 of Transformers. "
                          "Use `eval_strategy` instead\""},
        {"no_cuda", "training", "Deprecated HF name of use_cpu.", &Mover::renamed, "use_cpu",
         "HF: \"using `no_cuda` is deprecated and will be removed in version 5.0 of Transformers. Use `use_cpu` instead\"",
         "false"},
        {"ddp_timeout", "distributed", "HF ddp_timeout: the same setting as distributed.ddp_timeout.", &Mover::same_name},
        {"ddp_bucket_cap_mb", "distributed", "HF ddp_bucket_cap_mb: the same setting as distributed.ddp_bucket_cap_mb.",
         &Mover::same_name},
        {"train_sampling_strategy", "training",
         "transformers v5's sampler choice: random = group_by_length false, group_by_length = group_by_length true; "
         "sequential is refused (the training order is always the seeded shuffle).",
         &Mover::train_sampling_strategy},
        // TRL's SFTConfig (a TrainingArguments) names for the data section's settings.
        {"max_length", "data", "TRL SFTConfig max_length: the same setting as data.max_length.", &Mover::same_name},
        {"packing", "data", "TRL SFTConfig packing: the same setting as data.packing.", &Mover::same_name},
        {"packing_strategy", "data", "TRL SFTConfig packing_strategy: the same setting as data.packing_strategy.",
         &Mover::same_name},
        {"completion_only_loss", "data", "TRL SFTConfig completion_only_loss: the same setting as data.completion_only_loss.",
         &Mover::same_name},
        {"assistant_only_loss", "data", "TRL SFTConfig assistant_only_loss: the same setting as data.assistant_only_loss.",
         &Mover::same_name},
        {"dataset_text_field", "data", "TRL SFTConfig dataset_text_field: the same setting as data.dataset_text_field.",
         &Mover::same_name},
        {"eos_token", "data", "TRL SFTConfig eos_token: the same setting as data.eos_token.", &Mover::same_name},
        {"pad_token", "data", "TRL SFTConfig pad_token: the same setting as data.pad_token.", &Mover::same_name},
        {"chat_template_path", "data", "TRL SFTConfig chat_template_path: the same setting as data.chat_template.",
         &Mover::renamed, "chat_template"},
        {"bf16", "precision", "HF --bf16: the same setting as precision.bf16.", &Mover::same_name},
        {"fp16", "precision", "HF --fp16: the same setting as precision.fp16.", &Mover::same_name},
        {"sharded_ddp", "zero",
         "HF (FairScale) sharded DDP: simple / zero_dp_2 = zero.stage 2, zero_dp_3 = 3; offload (or cpu_offload) = "
         "zero.offload_optimizer cpu (and zero.offload_param cpu at stage 3); auto_wrap is what hftrain does. Not "
         "together with zero.stage, fsdp or deepspeed.",
         &Mover::sharded_ddp},
        {"fsdp", "zero",
         "HF FSDP sharding: full_shard = zero.stage 3, shard_grad_op = 2, no_shard = 0; offload = zero.offload_param cpu; "
         "auto_wrap is what hftrain does (gather per transformer block). Not together with zero.stage.",
         &Mover::fsdp},
        {"fsdp_config", "zero",
         "HF FSDP settings: activation_checkpointing = training.gradient_checkpointing, offload_params = "
         "zero.offload_param cpu, backward_prefetch NO_PREFETCH = zero.stage3_prefetch_bucket_size 0, "
         "cpu_ram_efficient_loading = zero.zero3_init_flag; min_num_params, "
         "transformer_layer_cls_to_wrap, forward_prefetch, limit_all_gathers, sync_module_states, use_orig_params are "
         "what hftrain does; others are refused.",
         &Mover::fsdp_config},
    };
    const std::vector<HfName> long_context = long_context_names();
    all.insert(all.end(), long_context.begin(), long_context.end());
    return all;
  }();
  return names;
}

}  // namespace

std::optional<int> fsdp_sharding_stage(const std::string& word) {
  static const std::map<std::string, int> kStages = {{"full_shard", 3}, {"shard_grad_op", 2}, {"no_shard", 0}};
  auto it = kStages.find(word);
  return it == kStages.end() ? std::nullopt : std::optional<int>(it->second);
}

void place_setting(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins, const std::string& section,
                   const std::string& key, const YAML::Node& value, const std::string& shown, const SettingSource& source) {
  // `section` may be nested ("zero.offload_optimizer"): missing levels are created as mappings.
  YAML::Node node = root;
  std::stringstream parts(section);
  for (std::string part; std::getline(parts, part, '.');) {
    YAML::Node next = lookup(node, part);
    if (!next.IsDefined() || next.IsNull()) {
      node[part] = YAML::Node(YAML::NodeType::Map);
      next.reset(node[part]);
    }
    if (!next.IsMap()) return;  // the section's own parse reports it
    node.reset(next);  // rebinds the handle (operator= would overwrite the node it refers to)
  }
  const std::string path = section + "." + key;
  const std::string where = source.file_issues.where(source.written, source.node);
  const bool from_set = where.rfind("--set", 0) == 0;
  std::string over;  // the file's value that the command line's replaces
  if (YAML::Node own = lookup(node, key); own.IsDefined()) {
    if (same_yaml_value(own, value)) return;
    // A value on the command line is an override in any spelling: it wins over the file's (as in HF and
    // Accelerate); the same setting written twice in the file, or twice on the command line, is a conflict.
    const bool own_from_set = from_command_line(issues, path, own);
    if (own_from_set && !from_set) return;
    if (!(from_set && !own_from_set)) {
      source.file_issues.add(source.written, source.node,
                             "'" + shown + "' disagrees with " + path + ": '" + yaml_text(own) + "' at " +
                                 issues.where(path, own) + " (the same setting written twice; give only one)");
      return;
    }
    over = ", over '" + yaml_text(own) + "' at " + issues.where(path, own);
  }
  node[key] = value;
  issues.mark_origin(path, from_set ? where : where + " (as " + source.written + ")");
  origins[path] = source.written + ": " + shown + " (" + where + over + ")";
}

void move_hf_training_names(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                            std::vector<std::string>& notes) {
  YAML::Node training = lookup(root, "training");
  if (!training.IsMap()) return;  // the section's own parse reports it
  Mover mover(root, issues, origins, notes);
  for (const auto& hf : hf_names()) {
    YAML::Node value = lookup(training, hf.name);
    if (!value.IsDefined()) continue;
    if (!value.IsNull()) (mover.*hf.move)(hf, value);  // null: HF's None, not given
    while (lookup(training, hf.name).IsDefined()) training.remove(hf.name);  // a repeat is reported as a duplicate
  }
}

std::vector<OptionInfo> hf_training_names() {
  std::vector<OptionInfo> out;
  for (const auto& hf : hf_names()) out.push_back({hf.name, "HF name for " + hf.section, "", hf.help});
  return out;
}

}  // namespace hftrain
