// HF model families hftrain knows, keyed by config.json model_type: which hftrain model type each HF
// architecture maps to, and the HF checkpoint naming rules the weight loader applies (base-model
// prefix, tensors HF itself ignores when loading, head tensors HF initialises when absent). Plain data,
// no LibTorch: used by run-spec parsing (model.from_pretrained) and by checkpoint/model_io.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hftrain {

// A model's sizes as HF's config accessors give them (config.hidden_size, num_hidden_layers,
// num_attention_heads, whatever the family names them): DeepSpeed's "auto" values and `hftrain estimate`'s
// activation sizes read them. Each model family declares them from its own options (Model::Facts).
struct ModelDimensions {
  int64_t hidden_size = 0;      // 0 = the model has none (a DeepSpeed "auto" that needs it is refused)
  int64_t layers = 0;           // blocks that hold activations (encoder and decoder together); 0 = none
  int64_t attention_heads = 0;  // the most heads of any attention layer; 0 = none
};

struct ModelFamily {
  std::string model_type;                              // config.json "model_type"
  std::string default_type;                            // hftrain model type when no architecture matches
  std::map<std::string, std::string> architectures;    // HF class name -> hftrain model type
  std::vector<std::string> refused_config_keys;        // non-null values hftrain cannot honour (ConfigError)
  // PEFT's default LoRA target_modules for the family (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING);
  // empty = none, the peft section must name them.
  std::vector<std::string> lora_target_modules;
  // Options of the hftrain type that config.json spells otherwise (option name -> config.json key), read when
  // the option's own key is absent: hftrain's gpt writes block_size as HF's n_positions.
  std::map<std::string, std::string> option_config_keys;
  // Rotary position embeddings: config.json's rope_theta / rope_scaling (or v5's rope_parameters) are read
  // into the options rope_theta / rope_scaling (runspec/rope_scaling: with_v4_rope_keys).
  bool rotary = false;
};

// Per hftrain model type: how HF checkpoints of it are named.
struct LoadRules {
  std::string base_prefix;                     // "transformer." etc.: files saved from the base model lack it
  std::vector<std::string> ignored_unexpected; // name prefixes or ".suffix"es of file tensors to skip
  std::vector<std::string> initialised_if_missing;  // name prefixes of head tensors HF initialises fresh
  // File tensor name -> model tensor name, used only when the file holds no tensor of the model name: a
  // tied copy stored instead of the tensor it is tied to (T5's encoder.embed_tokens.weight for
  // shared.weight). Further copies are then skipped when listed in ignored_unexpected.
  std::map<std::string, std::string> aliases;
};

// nullptr when `model_type` is not a known family.
const ModelFamily* find_model_family(const std::string& model_type);
// The family an hftrain model type belongs to (bert_mlm -> bert); nullptr when none.
const ModelFamily* family_of_type(const std::string& hftrain_type);
// "gpt, mlp, gpt2, bert, llama, t5, bart" for messages.
std::string known_model_types();
// Loading rules for an hftrain model type (empty rules for types without HF checkpoints).
LoadRules load_rules_for(const std::string& hftrain_type);
// The hftrain model type a config.json describes; throws ConfigError naming `config_path` when the
// model_type is missing or unknown, or a refused key is set.
std::string model_type_from_config(const nlohmann::json& config, const std::string& config_path);
// The hftrain model type whose config_json() has this model_type/architectures ("" when unknown).
std::string hftrain_type_of(const nlohmann::json& config);
// The config.json key holding option `option` of a model of this config's family: the option's own name
// when the config has it, else the family's spelling of it (ModelFamily::option_config_keys) when the
// config has that; "" when neither is there.
std::string config_key_of_option(const nlohmann::json& config, const std::string& option);

}  // namespace hftrain
