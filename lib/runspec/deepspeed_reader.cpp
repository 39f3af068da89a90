// Reading a DeepSpeed config into the run spec's sections (apply_deepspeed_config, see
// deepspeed_config.h): every key is placed into the section key that means the same thing, noted as a
// hint, refused, or reported as a typo with a did-you-mean.
#include "runspec/deepspeed_config.h"

#include <filesystem>
#include <memory>

#include "config/duplicate_keys.h"
#include "runspec/deepspeed_keys.h"
#include "runspec/hf_names.h"
#include "runspec/run_spec.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

using namespace deepspeed;
using nlohmann::json;

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
      } else if (key == "activation_checkpointing") {
        activation_checkpointing(v);
      } else if (const auto* option = schema_of<DistributedArgs>().find_deepspeed(key)) {
        place(key, v, "distributed", option->name(), v);  // sequence_parallel_size
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
                                      "aio", "communication_data_type", "activation_checkpointing", "train_batch_size",
                                      "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping"};
    for (const auto& k : schema_of<DistributedArgs>().deepspeed_names()) names.push_back(k);
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
    // The zero section's own options name their DeepSpeed keys (Field::deepspeed); the others are the
    // offload sections, DeepSpeed's deprecated booleans, the bucket size (in elements) and kZeroOthers.
    const Schema<ZeroArgs>& zero = schema_of<ZeroArgs>();
    std::vector<std::string> known = zero.deepspeed_names();
    for (const char* k : {"offload_optimizer", "offload_param", "reduce_bucket_size", "cpu_offload", "cpu_offload_params"})
      known.push_back(k);
    for (const auto& k : kZeroOthers) known.push_back(k.name);
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
      } else if (key == "reduce_bucket_size") {
        // Elements; converted to distributed.ddp_bucket_cap_mb once the gradient dtype is known.
      } else if (const auto* option = zero.find_deepspeed(key); option && !is_auto(v)) {
        place(path, v, "zero", option->name(), v);
      } else if (option && contains(kZeroFilledFromModel, option->name())) {
        // "auto": filled from the model's hidden size at stage 3 (deepspeed_resolve)
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
      place_keys(path, v, "zero.offload_optimizer", schema_of<OffloadOptimizerArgs>().names(), kOffloadOptimizerHints);
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

  // cpu_checkpointing is training.gradient_checkpointing_offload (which needs training.gradient_checkpointing:
  // the HF models checkpoint through torch, not deepspeed.checkpointing); the other keys are hints.
  void activation_checkpointing(const YAML::Node& v) {
    if (!expect_map("activation_checkpointing", v)) return;
    std::vector<std::string> known = {"cpu_checkpointing"};
    for (const auto& h : kActivationCheckpointingHints) known.push_back(h.first);
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar(), path = "activation_checkpointing." + key;
      auto hint = std::find_if(kActivationCheckpointingHints.begin(), kActivationCheckpointingHints.end(),
                               [&](const auto& h) { return h.first == key; });
      if (key == "cpu_checkpointing") place(path, kv.second, "training", "gradient_checkpointing_offload", kv.second);
      else if (hint != kActivationCheckpointingHints.end()) note(path, hint->second);
      else unknown(path, key, kv.second, known);
    }
  }

  void aio(const YAML::Node& v) { place_keys("aio", v, "zero.aio", schema_of<AioArgs>().names(), kAioHints); }

  void fp16(const YAML::Node& v) {
    if (!expect_map("fp16", v)) return;
    // The loss scaler's keys are the precision section's options of the same name (its switches aside).
    std::vector<std::string> scaler;
    for (const auto& name : schema_of<PrecisionArgs>().names())
      if (name != "bf16" && name != "fp16" && name != "save_dtype") scaler.push_back(name);
    std::vector<std::string> known = {"enabled", "auto_cast", "fp16_master_weights_and_grads"};
    known.insert(known.end(), scaler.begin(), scaler.end());
    for (const auto& kv : v) {
      const std::string key = kv.first.Scalar();
      const std::string path = "fp16." + key;
      if (key == "enabled") continue;  // compared with precision.fp16 (HF's fp16)
      if (contains(scaler, key)) {
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

// The ds_config of the transformers v4.x DeepSpeed docs sets the hidden-size dependent sizes to 0: "set
// these to 0 and the Trainer fills them from hidden_size" (HF's later "auto"). Such a 0 is taken as "auto",
// in place (the value keeps its file position), and the log says so.
void take_legacy_zero_as_auto(YAML::Node& config, std::vector<std::string>& notes) {
  YAML::Node z = lookup(config, "zero_optimization");
  if (!z.IsMap()) return;
  std::vector<std::string> keys = {"reduce_bucket_size"};  // and the options HF fills, under every DeepSpeed name
  for (const std::string& option : kZeroFilledFromModel)
    for (const std::string& name : schema_of<ZeroArgs>().find(option)->deepspeed_names()) keys.push_back(name);
  for (const std::string& key : keys) {
    YAML::Node v = lookup(z, key);
    if (!v.IsScalar() || !same_yaml_value(v, YAML::Node(0))) continue;
    v = "auto";
    notes.push_back("DeepSpeed zero_optimization." + key + ": 0 is the v4.x docs' spelling of \"auto\" (\"the "
                    "Trainer fills them from hidden_size\"), taken as \"auto\"");
  }
}

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
    take_legacy_zero_as_auto(config, notes);
    out.written_json = to_json(config).dump();
    DeepSpeedReader(root, issues, located, origins, notes, out).read(config);
  }
  if (file_issues) issues.absorb(*file_issues);
  training.remove("deepspeed");
}

}  // namespace hftrain
