// The DeepSpeed config after the sections are parsed and at train start (see deepspeed_config.h): "auto"
// filled from the model and the TrainingArguments as transformers' HfTrainerDeepSpeedConfig fills it, and
// every value that disagrees with its TrainingArguments value reported as HF reports it.
#include "runspec/deepspeed_config.h"

#include <algorithm>

#include "runspec/deepspeed_keys.h"
#include "runspec/run_spec.h"
#include "util/error.h"

namespace hftrain {
namespace {

using namespace deepspeed;
using nlohmann::json;

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

ModelDimensions model_dimensions(const RunSpec& spec, const ComponentCatalog& catalog) {
  if (spec.model.type.empty() || !catalog.models.contains(spec.model.type) || !catalog.model_dimensions) return {};
  return catalog.model_dimensions(spec.model.type, spec.model.options);
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
  const int64_t hidden = model_dimensions(spec, catalog).hidden_size;
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
    for (const std::string& key : kZeroFilledFromModel) {
      std::string path;
      json v;
      for (const std::string& name : schema_of<ZeroArgs>().find(key)->deepspeed_names()) {  // DeepSpeed's name, its aliases
        path = "zero_optimization." + name;
        if (!(v = at_path(config, path)).is_null()) break;
      }
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
