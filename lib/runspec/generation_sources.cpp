// Generation settings from Seq2SeqTrainingArguments and generation_config.json (see generation_sources.h).
#include "runspec/generation_sources.h"

#include <filesystem>
#include <set>

#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

// generation_config.json keys hftrain's generation reads under the same name: the generation section's
// options (which carry GenerationConfig's names), but for hftrain's own sampling seed.
const std::set<std::string>& supported_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> names;
    for (const auto& name : schema_of<GenerationArgs>().names())
      if (name != "seed") names.insert(name);
    return names;
  }();
  return keys;
}

// Keys that describe the model or the file, not a generation setting: the model's config.json holds the
// token ids hftrain uses (decoder_start_token_id included).
const std::set<std::string> kModelFacts = {"_from_model_config", "transformers_version", "_commit_hash", "pad_token_id",
                                           "bos_token_id"};

// Settings hftrain does not build, with the value that leaves HF's generation unchanged (HF's default).
const std::map<std::string, nlohmann::json> kNeutralValues = {
    {"repetition_penalty", 1.0},      {"encoder_repetition_penalty", 1.0}, {"num_beam_groups", 1},
    {"diversity_penalty", 0.0},       {"typical_p", 1.0},                  {"epsilon_cutoff", 0.0},
    {"eta_cutoff", 0.0},              {"encoder_no_repeat_ngram_size", 0}, {"renormalize_logits", false},
    {"remove_invalid_values", false}, {"use_cache", true},                 {"output_attentions", false},
    {"output_hidden_states", false},  {"output_scores", false},            {"output_logits", false},
    {"return_dict_in_generate", false}};

std::string generation_config_file(const TrainingArgs& training, const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (!training.generation_config.empty()) {
    const std::string& given = training.generation_config;
    const std::string file = fs::is_directory(given) ? given + "/generation_config.json" : given;
    if (!fs::exists(file))
      throw ConfigError("training.generation_config: '" + file + "' does not exist (give a generation_config.json or "
                        "the directory holding one)");
    return file;
  }
  if (!model_dir.empty() && fs::exists(model_dir + "/generation_config.json")) return model_dir + "/generation_config.json";
  return "";
}

// The spec value for generation_config.json's `key`, or an undefined node after recording why not.
YAML::Node setting_value(const std::string& key, const nlohmann::json& value, const std::string& file, Issues& issues,
                         GenerationSourceFacts& facts) {
  if (key == "eos_token_id" && value.is_array()) {  // HF allows several eos tokens
    if (value.size() == 1) return json_to_yaml_scalar(value[0]);
    facts.unsupported.push_back(file + ": eos_token_id: several eos tokens " + value.dump() +
                                " are not supported (generation stops at one: set generation.eos_token_id)");
    return YAML::Node();
  }
  if (key == "early_stopping" && value.is_boolean()) return YAML::Node(value.get<bool>() ? "true" : "false");
  YAML::Node v = json_to_yaml_scalar(value);
  if (!v.IsDefined()) issues.add_at(file, key, "expected a number, string or boolean, got " + value.dump());
  return v;
}

}  // namespace

void fill_generation_section(YAML::Node& root, const TrainingArgs& training, const std::string& model_dir,
                             Issues& issues, std::map<std::string, std::string>& origins, GenerationSourceFacts& facts) {
  YAML::Node section = lookup(root, "generation");
  if (section.IsDefined() && !section.IsNull() && !section.IsMap()) return;  // the section's parser reports it
  if (!section.IsDefined() || section.IsNull()) section = YAML::Node(YAML::NodeType::Map);
  auto given = [&](const std::string& key) {
    const YAML::Node v = lookup(section, key);
    return v.IsDefined() && !v.IsNull();
  };
  // A key the spec or --set writes as null is the spec's own choice too: no source fills it.
  auto cleared = [&](const std::string& key) { return lookup(section, key).IsDefined() && lookup(section, key).IsNull(); };
  for (const auto& kv : section) {
    if (given(kv.first.Scalar())) facts.given_keys.push_back(kv.first.Scalar());
    if (cleared(kv.first.Scalar())) facts.cleared_keys.push_back(kv.first.Scalar());
  }
  auto fill = [&](const std::string& key, const YAML::Node& value, const std::string& source) {
    if (given(key) || cleared(key)) return;  // the spec's own setting wins
    section[key] = value;
    origins.emplace("generation." + key, source);
    issues.mark_origin("generation." + key, source);
  };
  if (training.generation_max_length)
    fill("max_length", YAML::Node(std::to_string(*training.generation_max_length)), "training.generation_max_length");
  if (training.generation_num_beams)
    fill("num_beams", YAML::Node(std::to_string(*training.generation_num_beams)), "training.generation_num_beams");

  const std::string file = generation_config_file(training, model_dir);
  if (file.empty() && !model_dir.empty() && std::filesystem::exists(model_dir + "/config.json")) {
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(read_text_file(model_dir + "/config.json"));
    } catch (const nlohmann::json::exception&) {
      config = nullptr;  // the model section reports a malformed config.json
    }
    if (config.is_object())
      for (const auto& key : supported_keys())  // HF GenerationConfig.from_model_config, but for the eos id
        if (key != "eos_token_id" && config.contains(key) && !config[key].is_null() && !given(key) && !cleared(key)) {
          YAML::Node v = setting_value(key, config[key], model_dir + "/config.json", issues, facts);
          if (v.IsDefined()) fill(key, v, model_dir + "/config.json (" + key + ")");
        }
  }
  if (!file.empty()) {
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(read_text_file(file));
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(file + ": not valid JSON: " + e.what());
    }
    if (!config.is_object()) throw ConfigError(file + ": expected a JSON object of generation settings");
    for (const auto& [key, value] : config.items()) {
      if (kModelFacts.count(key) || value.is_null()) continue;
      if (key == "decoder_start_token_id") {
        if (!value.is_number_integer()) {
          issues.add_at(file, key, "expected a token id, got " + value.dump());
          continue;
        }
        facts.decoder_start_token_id = value.get<int64_t>();
        facts.decoder_start_source = file;
        continue;
      }
      if (supported_keys().count(key)) {
        if (given(key) || cleared(key)) continue;
        YAML::Node v = setting_value(key, value, file, issues, facts);
        if (v.IsDefined()) fill(key, v, file + " (" + key + ")");
        continue;
      }
      auto neutral = kNeutralValues.find(key);
      if (neutral != kNeutralValues.end() && neutral->second == value) continue;
      std::string supported;
      for (const auto& k : supported_keys()) supported += (supported.empty() ? "" : ", ") + k;
      facts.unsupported.push_back(file + ": " + key + ": " + value.dump() +
                                  " is a generation setting hftrain does not build (supported: " + supported +
                                  "); remove it from the file, or name another file in training.generation_config");
    }
  }
  if (section.size() > 0) root["generation"] = section;
}

}  // namespace hftrain
