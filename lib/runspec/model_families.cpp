// The model family table (see model_families.h).
#include "runspec/model_families.h"

#include "util/error.h"

namespace hftrain {
namespace {

const std::vector<ModelFamily>& families() {
  static const std::vector<ModelFamily> table = {
      // hftrain's own families (not HF classes)
      {"gpt", "gpt", {{"GptLMHeadModel", "gpt"}}, {}, {"c_attn"}, {{"block_size", "n_positions"}}},
      {"mlp", "mlp", {{"MlpForClassification", "mlp"}}, {}, {}},
      {"gpt2", "gpt2", {{"GPT2LMHeadModel", "gpt2"}, {"GPT2Model", "gpt2"}}, {}, {"c_attn"}},
      {"bert",
       "bert_mlm",
       {{"BertForSequenceClassification", "bert"}, {"BertForMaskedLM", "bert_mlm"}, {"BertForPreTraining", "bert_mlm"},
        {"BertModel", "bert_mlm"}},
       {},
       {"query", "value"}},
      // rotary: rope_scaling / rope_parameters read and checked by runspec/rope_scaling
      {"llama", "llama", {{"LlamaForCausalLM", "llama"}, {"LlamaModel", "llama"}}, {}, {"q_proj", "v_proj"}, {}, true},
      {"t5", "t5", {{"T5ForConditionalGeneration", "t5"}, {"T5Model", "t5"}}, {}, {"q", "v"}},
      {"bart", "bart", {{"BartForConditionalGeneration", "bart"}, {"BartModel", "bart"}}, {}, {"q_proj", "v_proj"}},
  };
  return table;
}

const std::map<std::string, LoadRules>& rules() {
  static const std::map<std::string, LoadRules> table = {
      {"gpt2", {"transformer.", {".attn.bias", ".attn.masked_bias", "lm_head.weight"}, {}}},
      {"bert",
       {"bert.", {".position_ids", "cls."}, {"classifier.", "bert.pooler."}}},
      {"bert_mlm",
       {"bert.",
        {".position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "cls.seq_relationship.",
         "bert.pooler."},
        {}}},
      {"llama", {"model.", {".rotary_emb.inv_freq", "lm_head.weight"}, {}}},
      // HF stores the tied embedding once, as shared.weight; some files carry encoder/decoder.embed_tokens
      // copies (or only those), and lm_head.weight when tied.
      {"t5",
       {"",
        {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"},
        {"lm_head."},
        {{"encoder.embed_tokens.weight", "shared.weight"}, {"decoder.embed_tokens.weight", "shared.weight"}}}},
      // BartForConditionalGeneration files name everything under model. (BartModel files without it);
      // the embedding is stored once as model.shared.weight, with or without the embed_tokens copies.
      {"bart",
       {"model.",
        {".embed_tokens.weight", "lm_head.weight"},
        {"lm_head.", "final_logits_bias"},
        {{"model.encoder.embed_tokens.weight", "model.shared.weight"},
         {"model.decoder.embed_tokens.weight", "model.shared.weight"}}}},
  };
  return table;
}

}  // namespace

const ModelFamily* family_of_type(const std::string& hftrain_type) {
  for (const auto& f : families())
    for (const auto& [architecture, type] : f.architectures)
      if (type == hftrain_type) return &f;
  return nullptr;
}

const ModelFamily* find_model_family(const std::string& model_type) {
  for (const auto& f : families())
    if (f.model_type == model_type) return &f;
  return nullptr;
}

std::string known_model_types() {
  std::string list;
  for (const auto& f : families()) list += (list.empty() ? "" : ", ") + f.model_type;
  return list;
}

LoadRules load_rules_for(const std::string& hftrain_type) {
  auto it = rules().find(hftrain_type);
  return it == rules().end() ? LoadRules{} : it->second;
}

std::string hftrain_type_of(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) return "";
  const ModelFamily* family = find_model_family(config["model_type"].get<std::string>());
  if (!family) return "";
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const auto& a : config["architectures"])
      if (a.is_string())
        if (auto it = family->architectures.find(a.get<std::string>()); it != family->architectures.end())
          return it->second;
  return family->default_type;
}

std::string config_key_of_option(const nlohmann::json& config, const std::string& option) {
  if (!config.is_object()) return "";
  if (config.contains(option)) return option;
  const ModelFamily* family =
      config.contains("model_type") && config["model_type"].is_string() ? find_model_family(config["model_type"].get<std::string>()) : nullptr;
  if (!family) return "";
  auto it = family->option_config_keys.find(option);
  return it != family->option_config_keys.end() && config.contains(it->second) ? it->second : "";
}

std::string model_type_from_config(const nlohmann::json& config, const std::string& config_path) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    throw ConfigError(config_path + ": no \"model_type\" string (known model types: " + known_model_types() + ")");
  const std::string model_type = config["model_type"].get<std::string>();
  const ModelFamily* family = find_model_family(model_type);
  if (!family)
    throw ConfigError(config_path + ": model_type '" + model_type + "' is not supported (known: " +
                      known_model_types() + ")");
  for (const auto& key : family->refused_config_keys)
    if (config.contains(key) && !config[key].is_null())
      throw ConfigError(config_path + ": \"" + key + "\" is set but hftrain's " + model_type +
                        " does not implement it (remove it or set it to null)");
  return hftrain_type_of(config);
}

}  // namespace hftrain
