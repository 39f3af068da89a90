// HF TrainingArguments fields hftrain does not build, and the values of them that ask for nothing
// (see hf_unbuilt.h).
#include "runspec/hf_unbuilt.h"

#include <map>

#include "runspec/sections.h"

namespace hftrain {
namespace {

// One unbuilt field: the values that ask for nothing besides null and empty ones (YAML texts, compared
// as same_yaml_value does), and why the feature is not available. A field whose value is a mapping
// lists its keys in `keys` instead: it asks for nothing when every key it gives does.
struct Unbuilt {
  std::string name;
  std::vector<std::string> neutral;
  std::string reason;
  std::vector<Unbuilt> keys = {};
};

const char* const kHub = "nothing is uploaded: hftrain has no Hub client (copy output_dir to the Hub yourself)";
const char* const kApex = "apex and HF's half-precision backends: hftrain has its own mixed precision (precision.bf16)";
const char* const kCompile = "torch.compile / TorchDynamo: hftrain is compiled ahead of time";
const char* const kMetrics = "metrics are registered streaming components (`hftrain components`), not compute_metrics";
const char* const kAccelerate = "Accelerate's data dispatch: each worker reads its own shard of every batch";

const std::vector<Unbuilt>& unbuilt_fields() {
  static const std::vector<Unbuilt> fields = {
      {"do_train", {"false", "true"}, ""},  // HF's Trainer does not read it; `hftrain train` trains
      {"do_predict", {"false"}, "`hftrain train` does not predict: run `hftrain predict RUN_DIR` after training"},
      {"torch_empty_cache_steps", {}, "no accelerator cache to empty on a CPU build"},
      {"use_mps_device", {"false"}, "Apple MPS devices: this build runs on the CPU"},
      {"use_ipex", {"false"}, "Intel Extension for PyTorch is a Python package"},
      {"jit_mode_eval", {"false"}, "TorchScript tracing: hftrain is compiled ahead of time"},
      {"tpu_num_cores", {}, "TPUs"},
      {"tpu_metrics_debug", {"false"}, "TPUs"},
      {"xpu_backend", {}, "Intel XPU backends: this build runs on the CPU (distributed.backend gloo)"},
      {"fp16_opt_level", {"O1"}, kApex},
      {"fp16_backend", {"auto"}, kApex},
      {"half_precision_backend", {"auto"}, kApex},
      {"ddp_broadcast_buffers", {"false"}, "buffers are not broadcast during training (rank 0's initial weights are, once)"},
      {"debug", {}, "TPU metrics and underflow/overflow debugging"},
      {"dataloader_persistent_workers", {"false"}, "the loader is one thread; it is started for each epoch"},
      {"past_index", {"-1"}, "mems of Transformer-XL style models, which hftrain does not have"},
      {"remove_unused_columns", {"true", "false"}, ""},  // data sources produce exactly the model's inputs and labels
      {"label_names", {}, "the data source names the labels (data.label_column)"},
      {"fsdp_min_num_params", {"0"}, "HF's deprecated spelling: use fsdp_config.min_num_params"},
      {"fsdp_transformer_layer_cls_to_wrap", {}, "HF's deprecated spelling: use fsdp_config.transformer_layer_cls_to_wrap"},
      {"accelerator_config",
       {},
       "Accelerate's options",
       {{"split_batches", {"false"}, kAccelerate},
        {"dispatch_batches", {"false"}, kAccelerate},
        {"even_batches", {"true"}, "the last evaluation batch is not padded with repeated examples"},
        {"use_seedable_sampler", {"true"}, ""},  // the sampler is seeded (training.seed / data_seed)
        {"non_blocking", {"false"}, "no accelerator to copy to asynchronously"},
        {"gradient_accumulation_kwargs", {}, "Accelerate's gradient accumulation plugin"},
        {"use_configured_state", {"false"}, "no Accelerate state to reuse"}}},
      {"adafactor", {"false"}, "HF's deprecated flag: use optim: adafactor"},
      {"use_legacy_prediction_loop", {"false"}, "one prediction loop"},
      {"push_to_hub", {"false"}, kHub},
      {"hub_model_id", {}, kHub},
      {"hub_strategy", {"every_save"}, kHub},
      {"hub_token", {"<HUB_TOKEN>"}, kHub},  // to_dict() writes the placeholder in place of the token
      {"hub_private_repo", {"false"}, kHub},
      {"hub_always_push", {"false"}, kHub},
      {"hub_revision", {}, kHub},
      {"push_to_hub_model_id", {}, kHub},
      {"push_to_hub_organization", {}, kHub},
      {"push_to_hub_token", {"<PUSH_TO_HUB_TOKEN>"}, kHub},
      {"include_inputs_for_metrics", {"false"}, kMetrics},
      {"include_for_metrics", {}, kMetrics},
      {"eval_do_concat_batches", {"true", "false"}, ""},  // streaming metrics never concatenate
      {"batch_eval_metrics", {"false", "true"}, "evaluation always accumulates its metrics batch by batch (what true asks for)"},
      {"auto_find_batch_size", {"false"}, "not built: size the batch with `hftrain estimate` before the launch"},
      {"mp_parameters", {}, "SageMaker model parallelism"},
      {"torchdynamo", {}, kCompile},
      {"torch_compile", {"false"}, kCompile},
      {"torch_compile_backend", {}, kCompile},
      {"torch_compile_mode", {}, kCompile},
      {"ray_scope", {"last"}, "hyperparameter search is not built"},
      {"dispatch_batches", {"false"}, kAccelerate},
      {"split_batches", {"false"}, kAccelerate},
      {"use_liger_kernel", {"false"}, "Liger's Triton kernels need a GPU (its fused linear cross-entropy is "
                                      "built: training.chunked_lm_loss, on by default)"},
      {"liger_kernel_config", {}, "Liger's Triton kernels need a GPU"},
      {"eval_use_gather_object", {"false"}, "evaluation gathers tensors, not Python objects"},
      {"tp_size", {"0", "1"}, "tensor parallelism is not built (zero.stage shards the state instead)"},
      // transformers v5's new fields
      {"project", {"huggingface"}, "the project of a Trackio run: report_to has no trackio here"},
      {"trackio_space_id", {"trackio"}, "the Space of a Trackio run: report_to has no trackio here"},
      {"use_cache", {"false", "true"}, ""},  // the training forward returns no KV cache either way; generation keeps its own
      {"enable_jit_checkpoint", {"false", "true"}, ""},  // SIGTERM / SIGINT always finish the step, save and stop
  };
  return fields;
}

// Fields transformers v5 removed (its MIGRATION_GUIDE_V5.md), with the v5 spelling where it names one: a value
// that asks for something says so, beside the reason.
const std::map<std::string, std::string> kRemovedInV5 = {
    {"jit_mode_eval", ""},          {"tpu_num_cores", ""},          {"past_index", ""},
    {"ray_scope", ""},              {"mp_parameters", ""},          {"use_mps_device", ""},
    {"fp16_backend", ""},           {"half_precision_backend", ""}, {"use_legacy_prediction_loop", ""},
    {"fsdp_min_num_params", "fsdp_config"}, {"fsdp_transformer_layer_cls_to_wrap", "fsdp_config"},
    {"tpu_metrics_debug", "debug"}, {"push_to_hub_token", "hub_token"}, {"push_to_hub_model_id", "hub_model_id"},
    {"push_to_hub_organization", "hub_model_id"}, {"include_inputs_for_metrics", "include_for_metrics"},
};

std::string removed_in_v5(const std::string& name) {
  const auto it = kRemovedInV5.find(name);
  if (it == kRemovedInV5.end()) return "";
  return "; transformers v5 removed this field" + (it->second.empty() ? "" : " (v5: " + it->second + ")");
}

bool is_empty_value(const YAML::Node& v) {
  return v.IsNull() || (v.IsScalar() && v.Scalar().empty()) || ((v.IsSequence() || v.IsMap()) && v.size() == 0);
}

bool is_neutral(const Unbuilt& field, const YAML::Node& v) {
  if (is_empty_value(v)) return true;
  if (!field.keys.empty()) return false;  // a mapping is checked key by key
  for (const auto& text : field.neutral)
    if (v.IsScalar() && same_yaml_value(v, YAML::Node(text))) return true;
  return false;
}

std::string neutral_text(const Unbuilt& field) {
  std::string text = "null";
  for (const auto& n : field.neutral) text += ", " + n;
  return text;
}

// Reports each part of `value` that asks for something; `path` names it.
void check_field(const Unbuilt& field, const YAML::Node& value, const std::string& path, Issues& issues) {
  if (!field.keys.empty() && value.IsMap()) {
    for (const auto& kv : value) {
      const std::string key = kv.first.Scalar();
      const Unbuilt* sub = nullptr;
      for (const auto& k : field.keys)
        if (k.name == key) sub = &k;
      if (!sub) {
        std::vector<std::string> names;
        for (const auto& k : field.keys) names.push_back(k.name);
        issues.add(path + "." + key, kv.first, "not available (" + field.reason + ")" + did_you_mean(key, names));
      } else {
        check_field(*sub, kv.second, path + "." + key, issues);
      }
    }
    return;
  }
  if (is_neutral(field, value)) return;
  issues.add(path, value,
             "'" + yaml_text(value) + "' is not available: " + (field.reason.empty() ? "not one of the values hftrain accepts" : field.reason) +
                 " (accepted: " + (field.keys.empty() ? neutral_text(field) : "null or an empty mapping") +
                 ", which ask for nothing" + removed_in_v5(field.name) + ")");
}

}  // namespace

void take_unbuilt_hf_fields(YAML::Node& root, Issues& issues) {
  YAML::Node training = lookup(root, "training");
  if (!training.IsMap()) return;  // the section's own parse reports it
  std::vector<std::string> taken;
  for (const auto& kv : training) {
    const std::string key = kv.first.Scalar();
    if (kv.second.IsNull() && schema_of<TrainingArgs>().find(key)) {
      taken.push_back(key);  // HF's None: the field's default
      continue;
    }
    for (const auto& field : unbuilt_fields()) {
      if (field.name != key) continue;
      check_field(field, kv.second, "training." + key, issues);
      taken.push_back(key);
    }
  }
  for (const auto& key : taken)
    while (lookup(training, key).IsDefined()) training.remove(key);  // a repeat is reported as a duplicate already
}

std::vector<OptionInfo> hf_unbuilt_fields() {
  std::vector<OptionInfo> out;
  for (const auto& f : unbuilt_fields()) {
    std::string help = f.keys.empty() ? "accepted at " + neutral_text(f) : "a mapping of";
    for (const auto& k : f.keys) help += " " + k.name + " (" + neutral_text(k) + ")";
    if (!f.reason.empty()) help += "; other values are refused: " + f.reason;
    bool boolean = !f.neutral.empty();  // HF parses these as booleans (a bare flag is true)
    for (const auto& n : f.neutral) boolean = boolean && (n == "true" || n == "false");
    out.push_back({f.name, boolean ? "bool (HF field, not built)" : "HF field, not built", "", help});
  }
  return out;
}

bool is_unbuilt_hf_field(const std::string& name) {
  for (const auto& f : unbuilt_fields())
    if (f.name == name) return true;
  return false;
}

}  // namespace hftrain
