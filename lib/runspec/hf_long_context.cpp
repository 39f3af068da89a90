// gradient_checkpointing_kwargs and parallelism_config as HF TrainingArguments takes them (see hf_long_context.h).
#include "runspec/hf_long_context.h"

#include <algorithm>

#include "config/schema.h"
#include "runspec/hf_names.h"

namespace hftrain {
namespace {

// The field's mapping: the value itself, or its JSON / YAML text; null (HF's None) or empty text = none.
// A malformed value is reported at training.<name> and gives a null node.
YAML::Node field_mapping(const HfFieldTarget& t, const YAML::Node& v) {
  YAML::Node map = v;
  if (v.IsScalar()) {
    try {
      map = v.Scalar().empty() ? YAML::Node(YAML::NodeType::Null) : YAML::Load(v.Scalar());
    } catch (const YAML::Exception& e) {
      t.issues.add("training." + t.name, v, "not a mapping: " + e.msg);
      return YAML::Node(YAML::NodeType::Null);
    }
  }
  if (map.IsNull() || map.IsMap()) return map;
  t.issues.add("training." + t.name, v, "expected a mapping of settings");
  return YAML::Node(YAML::NodeType::Null);
}

bool is_value(const YAML::Node& v, const std::vector<std::string>& texts) {
  return v.IsScalar() && std::any_of(texts.begin(), texts.end(), [&](const std::string& t) { return same_yaml_value(v, YAML::Node(t)); });
}

// One key of the field: its node located in the file (the key's value when the field is a mapping, else the
// field's text), its dotted name and its text.
struct FieldKey {
  std::string key;
  YAML::Node value;
  YAML::Node located;
  std::string path;
};

std::vector<FieldKey> field_keys(const HfFieldTarget& t, const YAML::Node& written, const YAML::Node& map) {
  std::vector<FieldKey> keys;
  for (const auto& kv : map)
    keys.push_back({kv.first.Scalar(), kv.second, written.IsMap() ? kv.second : written,
                    "training." + t.name + "." + kv.first.Scalar()});
  return keys;
}

void refuse(const HfFieldTarget& t, const FieldKey& k, const std::string& why) {
  t.issues.add(k.path, k.located, "'" + yaml_text(k.value) + "': " + why);
}

}  // namespace

void HfFieldTarget::place(const std::string& section, const std::string& key, const YAML::Node& value,
                          const YAML::Node& located, const std::string& shown) const {
  place_setting(root, issues, origins, section, key, value, shown, SettingSource{"training." + name, located, issues});
}

void move_gradient_checkpointing_kwargs(const HfFieldTarget& t, const YAML::Node& v) {
  const YAML::Node map = field_mapping(t, v);
  if (map.IsNull()) return;
  const std::vector<std::string> known = {"offload", "use_reentrant", "preserve_rng_state", "determinism_check", "debug"};
  for (const FieldKey& k : field_keys(t, v, map)) {
    if (k.value.IsNull()) continue;  // None: the default
    if (k.key == "offload") {
      t.place("training", "gradient_checkpointing_offload", k.value, k.located, "offload: " + yaml_text(k.value));
    } else if (k.key == "use_reentrant") {  // torch's two implementations give the same gradients
      if (!is_value(k.value, {"true", "false"})) refuse(t, k, "expected true or false");
    } else if (k.key == "preserve_rng_state") {
      if (!is_value(k.value, {"true"}))
        refuse(t, k, "the recomputation always replays the forward's random state (dropout masks repeat); only true");
    } else if (k.key == "determinism_check") {
      if (!is_value(k.value, {"default", "none"})) refuse(t, k, "torch's check of recomputed metadata: default or none");
    } else if (k.key == "debug") {
      if (!is_value(k.value, {"false"})) refuse(t, k, "torch's recomputation trace is not available; only false");
    } else {
      t.issues.add(k.path, k.located, "'" + k.key + "' has no equivalent in hftrain's checkpointing" +
                                          did_you_mean(k.key, known) + " (it takes offload; use_reentrant, "
                                          "preserve_rng_state, determinism_check and debug at values that ask for nothing)");
    }
  }
}

void move_parallelism_config(const HfFieldTarget& t, const YAML::Node& v) {
  const YAML::Node map = field_mapping(t, v);
  if (map.IsNull()) return;
  const std::vector<std::string> known = {"sp_size", "sp_backend", "sp_handler", "dp_replicate_size", "dp_shard_size",
                                          "tp_size", "cp_size", "cp_backend", "tp_handler", "cp_handler"};
  const std::string no_cp = "context parallelism (ring attention) is not available";
  for (const FieldKey& k : field_keys(t, v, map)) {
    if (k.value.IsNull()) continue;  // None: Accelerate's default (1, or its environment variable)
    if (k.key == "sp_size") {
      int64_t size = 0;
      if (!ValueTraits<int64_t>::parse(k.value, size) || size < 1) refuse(t, k, "expected a positive integer");
      else t.place("distributed", "sequence_parallel_size", YAML::Node(size), k.located, "sp_size: " + yaml_text(k.value));
    } else if (k.key == "sp_backend") {
      if (!is_value(k.value, {"deepspeed"}))
        refuse(t, k, "Ulysses (DeepSpeed's all-to-all of heads for sequence) is the sequence parallelism hftrain runs; "
                     "only deepspeed");
    } else if (k.key == "sp_handler") {
      if (!(k.value.IsMap() && k.value.size() == 0))
        t.notes.push_back(k.path + ": " + yaml_text(k.value) + " accepted with no effect (hftrain slices each batch at "
                          "its own length, padded to a multiple of the group, and attends with its own kernels)");
    } else if (k.key == "dp_shard_size") {
      if (!is_value(k.value, {"1"}))
        t.notes.push_back(k.path + ": " + yaml_text(k.value) + " accepted with no effect (ZeRO, zero.stage, shards over "
                          "every rank; the data-parallel replicas are world / sequence_parallel_size)");
    } else if (k.key == "dp_replicate_size") {
      if (!is_value(k.value, {"1"})) refuse(t, k, "replicated groups of shards (HSDP) are not available; only 1");
    } else if (k.key == "tp_size") {
      if (!is_value(k.value, {"1"})) refuse(t, k, "tensor parallelism is not available (zero.stage shards the state instead); only 1");
    } else if (k.key == "tp_handler") {
      refuse(t, k, "tensor parallelism is not available");
    } else if (k.key == "cp_size") {
      if (!is_value(k.value, {"1"})) refuse(t, k, no_cp + "; only 1 (sp_size is Ulysses sequence parallelism)");
    } else if (k.key == "cp_backend" || k.key == "cp_handler") {
      t.notes.push_back(k.path + ": accepted with no effect (" + no_cp + ", so it is never used)");
    } else {
      t.issues.add(k.path, k.located, "'" + k.key + "' is not a ParallelismConfig field" + did_you_mean(k.key, known));
    }
  }
}

}  // namespace hftrain
