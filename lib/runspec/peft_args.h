// The `peft` section: PEFT's LoraConfig under its own names (r, lora_alpha, target_modules, use_dora, ...),
// declared once. The same fields are what adapter_config.json holds: an adapter directory's config is read
// into PeftArgs and PeftArgs is written back as adapter_config.json with PEFT's keys.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runspec/sections.h"

namespace hftrain {

// A mapping of names to values (PEFT's rank_pattern / alpha_pattern).
template <class E>
struct ValueTraits<std::map<std::string, E>> {
  static std::string name() { return "mapping of module name patterns to " + ValueTraits<E>::name(); }
  static bool parse(const YAML::Node& n, std::map<std::string, E>& out) {
    out.clear();
    if (n.IsNull()) return true;
    if (!n.IsMap()) return false;
    for (const auto& kv : n) {
      E e{};
      if (!kv.first.IsScalar() || !ValueTraits<E>::parse(kv.second, e)) return false;
      out[kv.first.Scalar()] = e;
    }
    return true;
  }
  static YAML::Node dump(const std::map<std::string, E>& v) {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [k, e] : v) n[k] = ValueTraits<E>::dump(e);
    return n;
  }
};

// PEFT's layers_to_transform: one layer index or a list of them (null = every layer).
struct LayerIndices {
  std::vector<int64_t> indices;
  bool single = false;  // written as one integer
};

template <>
struct ValueTraits<LayerIndices> {
  static std::string name() { return "layer index or list of them"; }
  static bool parse(const YAML::Node& n, LayerIndices& out) {
    out = LayerIndices{};
    if (n.IsScalar()) {
      int64_t i = 0;
      if (!ValueTraits<int64_t>::parse(n, i)) return false;
      out.indices = {i};
      out.single = true;
      return true;
    }
    return ValueTraits<std::vector<int64_t>>::parse(n, out.indices);
  }
  static YAML::Node dump(const LayerIndices& v) {
    return v.single ? ValueTraits<int64_t>::dump(v.indices.front()) : ValueTraits<std::vector<int64_t>>::dump(v.indices);
  }
};

struct PeftArgs {
  std::string peft_type = "LORA";
  std::optional<std::string> task_type;  // CAUSAL_LM, SEQ_2_SEQ_LM, SEQ_CLS, ... (SEQ_CLS saves the classifier)
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0.0;
  TargetModules target_modules;   // null = the family's PEFT default
  TargetModules exclude_modules;  // null = none
  std::string bias = "none";      // none, all, lora_only
  std::optional<std::vector<std::string>> modules_to_save;
  bool fan_in_fan_out = false;
  bool use_rslora = false;
  bool use_dora = false;
  std::string init_lora_weights = "true";  // true, false or gaussian (YAML/JSON booleans accepted)
  std::optional<LayerIndices> layers_to_transform;
  std::optional<std::string> layers_pattern;
  std::map<std::string, int64_t> rank_pattern;
  std::map<std::string, double> alpha_pattern;
  std::string base_model_name_or_path;  // adapter_config.json: where the base model came from
  bool inference_mode = false;
  std::optional<std::string> revision;
  static void declare(Schema<PeftArgs>& s);
};

// PeftArgs as PEFT's adapter_config.json (every LoraConfig key hftrain honours, PEFT's spellings).
nlohmann::json adapter_config_json(const PeftArgs& args);
// Reads adapter_config.json at `path`: PEFT keys hftrain honours are parsed as the peft section is; keys of
// PEFT features hftrain does not build must hold PEFT's neutral values, else ConfigError naming the file
// and key. A peft_type other than LORA is refused.
PeftArgs read_adapter_config(const std::string& path);

}  // namespace hftrain
