// The registered model family declarations (see model_families.h).
#include "runspec/model_families.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {
namespace {

// The registered declarations themselves (each lives as long as the program: a static beside its class).
std::vector<const ModelFamily*>& families() {
  static std::vector<const ModelFamily*> table;  // registration order
  return table;
}

bool lists(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Keys of HF's PretrainedConfig (and of the hub's files) that change nothing hftrain builds: identity,
// special tokens, output switches, generation defaults that generation_config.json takes over.
const std::vector<std::string>& generic_config_keys() {
  static const std::vector<std::string> keys = {
      "model_type", "architectures", "torch_dtype", "dtype", "transformers_version", "_name_or_path", "name_or_path",
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache",
      "return_dict", "output_hidden_states", "output_attentions", "torchscript", "id2label", "label2id",
      "problem_type", "tokenizer_class", "prefix", "task_specific_params", "finetuning_task", "_attn_implementation",
      "attn_implementation", "is_encoder_decoder", "tie_encoder_decoder", "chunk_size_feed_forward",
      "pruned_heads", "cross_attention_hidden_size", "add_cross_attention", "is_decoder", "num_labels",
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "temperature", "top_k", "top_p",
      "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
      "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
      "quantization_config"};  // a quantised checkpoint's (runspec/quantized_checkpoint.h)
  return keys;
}

}  // namespace

void register_model_family(const ModelFamily& family) {
  for (auto& f : families())
    if (f->type == family.type) {
      f = &family;
      return;
    }
  families().push_back(&family);
}

const ModelFamily* family_of_type(const std::string& hftrain_type) {
  for (const ModelFamily* f : families())
    if (f->type == hftrain_type) return f;
  return nullptr;
}

const ModelFamily* find_model_family(const std::string& model_type) {
  const ModelFamily* any = nullptr;
  for (const ModelFamily* f : families())
    if (f->model_type == model_type) {
      if (f->default_for_model_type) return f;
      if (!any) any = f;
    }
  return any;
}

std::string known_model_types() {
  std::vector<std::string> seen;
  std::string list;
  for (const ModelFamily* f : families()) {
    if (lists(seen, f->model_type)) continue;
    seen.push_back(f->model_type);
    list += (list.empty() ? "" : ", ") + f->model_type;
  }
  return list;
}

std::string hftrain_type_of(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) return "";
  const std::string model_type = config["model_type"].get<std::string>();
  const ModelFamily* fallback = find_model_family(model_type);
  if (!fallback) return "";
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const auto& a : config["architectures"])
      if (a.is_string())
        for (const ModelFamily* f : families())
          if (f->model_type == model_type && lists(f->architectures, a.get<std::string>())) return f->type;
  return fallback->type;
}

std::string config_key_of_option(const nlohmann::json& config, const std::string& option) {
  if (!config.is_object()) return "";
  if (config.contains(option)) return option;
  const ModelFamily* family = family_of_type(hftrain_type_of(config));
  if (!family) return "";
  auto it = family->option_config_keys.find(option);
  return it != family->option_config_keys.end() && config.contains(it->second) ? it->second : "";
}

std::string model_type_from_config(const nlohmann::json& config, const std::string& config_path) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    throw ConfigError(config_path + ": no \"model_type\" string (known model types: " + known_model_types() + ")");
  const std::string model_type = config["model_type"].get<std::string>();
  if (!find_model_family(model_type))
    throw ConfigError(config_path + ": model_type '" + model_type + "' is not supported (known: " +
                      known_model_types() + ")");
  const std::string type = hftrain_type_of(config);
  for (const auto& key : family_of_type(type)->refused_config_keys)
    if (config.contains(key) && !config[key].is_null())
      throw ConfigError(config_path + ": \"" + key + "\" is set but hftrain's " + model_type +
                        " does not implement it (remove it or set it to null)");
  return type;
}

namespace {

// Values that leave a feature off: null, false, 0.
bool switched_off(const nlohmann::json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) || (value.is_number() && value.get<double>() == 0.0);
}

}  // namespace

void check_config_keys(const ModelFamily& family, const nlohmann::json& config, const std::string& config_path,
                       const std::vector<std::string>& options,
                       const std::map<std::string, std::string>& other_families_options) {
  if (!config.is_object()) return;
  for (const auto& [key, value] : config.items()) {
    if (lists(options, key) || lists(generic_config_keys(), key)) continue;
    if (family.rotary && (key == "rope_parameters" || key == "rope_theta" || key == "rope_scaling")) continue;
    bool renamed = false;
    for (const auto& [option, spelling] : family.option_config_keys) renamed = renamed || spelling == key;
    if (renamed) continue;
    if (auto other = other_families_options.find(key); other != other_families_options.end() && !switched_off(value) &&
                                                        !family.neutral_config_keys.count(key))
      throw ConfigError(config_path + ": \"" + key + "\": " + value.dump() + " is a setting of hftrain's " + other->second +
                        ", which its " + family.model_type + " does not build (remove it, or use a family that has it)");
    if (!family.strict_config_keys) continue;
    auto neutral = family.neutral_config_keys.find(key);
    if (neutral != family.neutral_config_keys.end()) {
      if (neutral->second.is_null() || value == neutral->second || value.is_null()) continue;
      throw ConfigError(config_path + ": \"" + key + "\": " + value.dump() + " is not built in hftrain's " +
                        family.model_type + " (only " + neutral->second.dump() + " is)");
    }
    throw ConfigError(config_path + ": \"" + key + "\" is not a setting hftrain's " + family.model_type +
                      " builds (remove it, or use a family that has it)");
  }
}

}  // namespace hftrain
