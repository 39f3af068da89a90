// HF model families hftrain knows, keyed by config.json model_type. Each hftrain model type declares its
// family once, beside its class (models/: `static const ModelFamily& declaration()`), and registering the
// model registers the declaration here: which HF architectures load as that type, the HF checkpoint naming
// rules the weight loader applies (base-model prefix, tensors HF itself ignores when loading, head tensors
// HF initialises when absent, tied copies), PEFT's default LoRA targets, and the config.json keys the type
// refuses. Plain data, no LibTorch: used by run-spec parsing (model.from_pretrained) and by the models.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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

// How HF checkpoints of one hftrain model type are named.
struct LoadRules {
  std::string base_prefix;                     // "transformer." etc.: files saved from the base model lack it
  std::vector<std::string> ignored_unexpected; // name prefixes or ".suffix"es of file tensors to skip
  std::vector<std::string> initialised_if_missing;  // name prefixes of head tensors HF initialises fresh
  // File tensor name -> model tensor name, used only when the file holds no tensor of the model name: a
  // tied copy stored instead of the tensor it is tied to (T5's encoder.embed_tokens.weight for
  // shared.weight). Further copies are then skipped when listed in ignored_unexpected.
  std::map<std::string, std::string> aliases;
  // A file tensor that stacks several model tensors (transformers v5's fused experts): a file tensor named
  // <stem>.<fused> with first dimension N holds, for each n < N and each of `parts` in order, the model tensor
  // <stem>.<model_prefix>.<n>.<part>, each a contiguous run of the same length (v5's `mlp.experts.gate_up_proj`
  // [E, 2I, H]: per expert its gate rows [I, H], then its up rows).
  struct Stacked {
    std::string fused, model_prefix;
    std::vector<std::string> parts;
  };
  std::vector<Stacked> stacked;
  // File name suffix -> model name suffix, used when the model has no tensor of the file's name (v5 calls
  // Mixtral's `block_sparse_moe.gate.weight` `mlp.gate.weight`).
  std::vector<std::pair<std::string, std::string>> renamed_suffixes;
};

// One hftrain model type's declaration (several types may share a config.json model_type: bert, bert_mlm).
struct ModelFamily {
  std::string type;        // the hftrain model type (its registry name)
  std::string model_type;  // config.json "model_type"
  // HF classes loaded as this type; the first is the one its config.json names in "architectures".
  std::vector<std::string> architectures;
  bool default_for_model_type = true;  // chosen when config.json's architectures name no type of the family
  // PEFT's default LoRA target_modules for the family (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING);
  // empty = none, the peft section must name them.
  std::vector<std::string> lora_target_modules;
  // Options that config.json spells otherwise (option name -> config.json key): read from that key when the
  // option's own is absent, and written under it (hftrain's gpt writes block_size as HF's n_positions).
  std::map<std::string, std::string> option_config_keys;
  // Rotary position embeddings: config.json's rope_theta / rope_scaling (or v5's rope_parameters) are read
  // into the options rope_theta / rope_scaling (runspec/rope_scaling: with_v4_rope_keys).
  bool rotary = false;
  // The config.json key of the sliding layers' rope_theta, for v5's rope_parameters keyed by layer type
  // ({"full_attention": {...}, "sliding_attention": {...}}; gemma3_text's rope_local_base_freq): the global
  // layers' entry is read as rope_theta / rope_scaling, the sliding layers' theta into this key. "" = that form
  // is refused.
  std::string sliding_rope_theta_key;
  // Keys whose non-null values hftrain cannot honour (ConfigError naming key and file).
  std::vector<std::string> refused_config_keys;
  // When true, every config.json key must be an option of the type, a key of HF's PretrainedConfig that
  // changes nothing here (check_config_keys lists them), or one of `neutral_config_keys` at its accepted
  // value; anything else (a MoE key, a soft-cap the family does not build) is refused naming key and file.
  bool strict_config_keys = false;
  std::map<std::string, nlohmann::json> neutral_config_keys;  // key -> the only value accepted (null = any)
  LoadRules load;
};

// Adds (or replaces) the declaration of family.type; models/register_models does it for each model. The
// declaration itself is kept, not a copy: it must live as long as the program (a static beside its class).
void register_model_family(const ModelFamily& family);
// The declaration of the type a config.json of this model_type loads as by default; nullptr when unknown.
const ModelFamily* find_model_family(const std::string& model_type);
// The declaration of an hftrain model type; nullptr when none.
const ModelFamily* family_of_type(const std::string& hftrain_type);
// "gpt, mlp, gpt2, bert, llama, t5, bart" for messages (registration order).
std::string known_model_types();
// The hftrain model type a config.json describes; throws ConfigError naming `config_path` when the
// model_type is missing or unknown, or a refused key is set.
std::string model_type_from_config(const nlohmann::json& config, const std::string& config_path);
// The hftrain model type whose config.json has this model_type/architectures ("" when unknown).
std::string hftrain_type_of(const nlohmann::json& config);
// The config.json key holding option `option` of a model of this config's family: the option's own name
// when the config has it, else the family's spelling of it (ModelFamily::option_config_keys) when the
// config has that; "" when neither is there.
std::string config_key_of_option(const nlohmann::json& config, const std::string& option);
// For a strict family (ModelFamily::strict_config_keys): throws ConfigError naming the first key of
// `config` that is none of `options` (the type's option names), a generic PretrainedConfig key or a
// neutral key at its accepted value. Every family: throws for a key that another family builds
// (`other_families_options`: option name -> the type that has it) but this one does not, set to something
// other than null, false or 0 (a soft-cap, a sliding window, a MoE key on llama); keys no family builds are
// kept for the saved config.json (save_pretrained's round trip).
void check_config_keys(const ModelFamily& family, const nlohmann::json& config, const std::string& config_path,
                       const std::vector<std::string>& options,
                       const std::map<std::string, std::string>& other_families_options = {});

}  // namespace hftrain
