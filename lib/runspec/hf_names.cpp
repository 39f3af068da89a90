// HF TrainingArguments names for the optimizer and schedule sections (see hf_names.h).
#include "runspec/hf_names.h"

#include <algorithm>
#include <sstream>

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
};

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
    place(hf, v, hf.key, v, yaml_text(v));
    if (!hf.deprecation.empty())
      notes_.push_back("training." + hf.name + ": " + hf.deprecation + " (taken as " + hf.section + "." + hf.key + ")");
  }

  // A TrainingArguments flag that is the option of the same name in another section (bf16 -> precision.bf16).
  void same_name(const HfName& hf, const YAML::Node& v) { place(hf, v, hf.name, v, yaml_text(v)); }

  // HF fsdp: "full_shard" / "shard_grad_op" / "no_shard" with optional "auto_wrap" and "offload"
  // (space-separated, or a list): the ZeRO stage that shards the same state.
  void fsdp(const HfName& hf, const YAML::Node& v) {
    std::vector<std::string> words;
    if (v.IsSequence()) {
      for (const auto& item : v) words.push_back(yaml_text(item));
    } else if (v.IsScalar()) {
      std::istringstream in(v.Scalar());
      for (std::string w; in >> w;) words.push_back(w);
    }
    if (words.empty()) return;  // "" = no FSDP (HF's default)
    if (YAML::Node stage = lookup(lookup(root_, "zero"), "stage"); stage.IsDefined()) {
      issues_.add("training.fsdp", v, "'" + yaml_text(v) + "' and zero.stage (" + issues_.where("zero.stage", stage) +
                                          ") both choose how the training state is sharded; give only one");
      return;
    }
    static const std::map<std::string, int> kStages = {{"full_shard", 3}, {"shard_grad_op", 2}, {"no_shard", 0}};
    const std::vector<std::string> known = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2",
                                            "offload", "auto_wrap"};
    for (const std::string& w : words) {
      if (auto it = kStages.find(w); it != kStages.end()) {
        place(hf, v, "stage", YAML::Node(it->second), w);
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
  YAML::Node& root_;
  Issues& issues_;
  std::map<std::string, std::string>& origins_;
  std::vector<std::string>& notes_;
};

const std::vector<HfName>& hf_names() {
  static const std::vector<HfName> names = [] {
    std::string optims;
    for (const auto& o : kHfOptimizers) optims += (optims.empty() ? "" : ", ") + o.hf_name + " -> " + o.type;
    return std::vector<HfName>{
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
         "HF: \"using `no_cuda` is deprecated and will be removed in version 5.0 of Transformers. Use `use_cpu` instead\""},
        {"bf16", "precision", "HF --bf16: the same setting as precision.bf16.", &Mover::same_name},
        {"fp16", "precision", "HF --fp16: the same setting as precision.fp16.", &Mover::same_name},
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
  }();
  return names;
}

}  // namespace

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
  if (YAML::Node own = lookup(node, key); own.IsDefined()) {
    if (!same_yaml_value(own, value))
      source.file_issues.add(source.written, source.node,
                             "'" + shown + "' disagrees with " + path + ": '" + yaml_text(own) + "' at " +
                                 issues.where(path, own) + " (the same setting written twice; give only one)");
    return;
  }
  node[key] = value;
  const std::string where = source.file_issues.where(source.written, source.node);
  const bool from_set = where.rfind("--set", 0) == 0;
  issues.mark_origin(path, from_set ? where : where + " (as " + source.written + ")");
  origins[path] = source.written + ": " + shown + " (" + where + ")";
}

void move_hf_training_names(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                            std::vector<std::string>& notes) {
  YAML::Node training = lookup(root, "training");
  if (!training.IsMap()) return;  // the section's own parse reports it
  Mover mover(root, issues, origins, notes);
  for (const auto& hf : hf_names()) {
    YAML::Node value = lookup(training, hf.name);
    if (!value.IsDefined()) continue;
    (mover.*hf.move)(hf, value);
    while (lookup(training, hf.name).IsDefined()) training.remove(hf.name);  // a repeat is reported as a duplicate
  }
}

std::vector<OptionInfo> hf_training_names() {
  std::vector<OptionInfo> out;
  for (const auto& hf : hf_names()) out.push_back({hf.name, "HF name for " + hf.section, "", hf.help});
  return out;
}

}  // namespace hftrain
