// The peft section and adapter_config.json (see peft_args.h).
#include "runspec/peft_args.h"

#include <algorithm>
#include <filesystem>

#include "runspec/json_yaml.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {

void PeftArgs::declare(Schema<PeftArgs>& s) {
  s.add("peft_type", &PeftArgs::peft_type, "PEFT method; LORA (DoRA is LORA with use_dora).").choices({"LORA"});
  s.add("task_type", &PeftArgs::task_type,
        "PEFT TaskType (CAUSAL_LM, SEQ_2_SEQ_LM, SEQ_CLS, TOKEN_CLS, QUESTION_ANS, FEATURE_EXTRACTION); SEQ_CLS "
        "also trains and saves the classification head (PEFT's modules_to_save for classifiers).")
      .check([](const std::optional<std::string>& v) -> std::string {
        static const std::vector<std::string> kinds = {"CAUSAL_LM", "SEQ_2_SEQ_LM", "SEQ_CLS", "TOKEN_CLS",
                                                       "QUESTION_ANS", "FEATURE_EXTRACTION"};
        if (!v || std::find(kinds.begin(), kinds.end(), *v) != kinds.end()) return "";
        std::string list;
        for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
        return "'" + *v + "' is not one of: " + list;
      });
  s.add("r", &PeftArgs::r, "LoRA rank.").min(1);
  s.add("lora_alpha", &PeftArgs::lora_alpha, "LoRA alpha: the update is scaled by lora_alpha / r.").greater_than(0);
  s.add("lora_dropout", &PeftArgs::lora_dropout, "Dropout on the input of the low-rank path while training.").min(0).max(0.999999);
  s.add("target_modules", &PeftArgs::target_modules,
        "Modules that get adapters: a list (a module whose name equals an entry or ends with '.' + entry), one "
        "string (a regular expression the whole module name must match), or all-linear; null = PEFT's default "
        "for the model family.");
  s.add("exclude_modules", &PeftArgs::exclude_modules, "Modules never adapted (same matching as target_modules).");
  s.add("bias", &PeftArgs::bias, "Biases trained and saved: none, all, or lora_only (those of adapted layers).")
      .choices({"none", "all", "lora_only"});
  s.add("modules_to_save", &PeftArgs::modules_to_save,
        "Modules trained whole and saved with the adapter (e.g. [classifier]); matched as target_modules lists.");
  s.add("fan_in_fan_out", &PeftArgs::fan_in_fan_out,
        "The target stores its weight as [in, out] (gpt2's Conv1D; forced there, as PEFT does).");
  s.add("use_rslora", &PeftArgs::use_rslora, "Rank-stabilised LoRA: scale by lora_alpha / sqrt(r).");
  s.add("use_dora", &PeftArgs::use_dora, "DoRA: a trained magnitude per output feature over the normalised weight.");
  s.add("init_lora_weights", &PeftArgs::init_lora_weights,
        "true (A kaiming-uniform, B zero: the adapter starts as a no-op), gaussian (A normal with std 1/r, B zero) "
        "or false (A and B random, for tests).")
      .check([](const std::string& v) -> std::string {
        if (v == "true" || v == "false" || v == "gaussian") return "";
        return "'" + v + "' is not available (true, false, gaussian): PEFT's data-driven initialisations "
               "(pissa, olora, loftq, eva, corda) are not built in hftrain";
      });
  s.add("layers_to_transform", &PeftArgs::layers_to_transform, "Only the blocks with these indices get adapters; null = all.");
  s.add("layers_pattern", &PeftArgs::layers_pattern,
        "Name of the module list holding the blocks (layers, h, block, blocks, layer); null = any of these.");
  s.add("rank_pattern", &PeftArgs::rank_pattern, "Rank per module: key matched as the regex (.*\\.)?key$ against the name.");
  s.add("alpha_pattern", &PeftArgs::alpha_pattern, "Alpha per module, matched as rank_pattern.");
  s.add("base_model_name_or_path", &PeftArgs::base_model_name_or_path,
        "The base model the adapter belongs to (written to adapter_config.json; model.from_pretrained by default).");
  s.add("inference_mode", &PeftArgs::inference_mode, "Written true in saved adapters (PEFT's convention).");
  s.add("revision", &PeftArgs::revision, "Hub revision of the base model (kept in adapter_config.json).");
}

namespace {

// A YAML value of a field whose schema type is `type`, as JSON: strings stay strings, the rest take the
// type their text spells (booleans, integers, numbers, null).
nlohmann::json yaml_to_json(const YAML::Node& n, const std::string& type) {
  if (n.IsNull()) return nullptr;
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = yaml_to_json(kv.second, type);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& v : n) a.push_back(yaml_to_json(v, type));
    return a;
  }
  const std::string& s = n.Scalar();
  if (type.rfind("string", 0) == 0 || type.rfind("one of", 0) == 0) return s;
  if (s == "true" || s == "false") return s == "true";
  try {
    std::size_t used = 0;
    if (s.find_first_of(".eE") == std::string::npos) {
      const long long i = std::stoll(s, &used);
      if (used == s.size()) return i;
    }
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

// Keys of adapter_config.json for PEFT features hftrain does not build; accepted only at a neutral value.
bool neutral(const nlohmann::json& v) {
  return v.is_null() || v == false || (v.is_object() && v.empty()) || (v.is_array() && v.empty()) || v == "";
}
const std::vector<std::string> kAcceptedAnyValue = {"megatron_core", "qalora_group_size", "auto_mapping", "peft_version"};

}  // namespace

nlohmann::json adapter_config_json(const PeftArgs& args) {
  const Schema<PeftArgs>& schema = schema_of<PeftArgs>();
  const YAML::Node dumped = schema.dump(args);
  nlohmann::json j = nlohmann::json::object();
  for (const OptionInfo& info : schema.describe()) j[info.name] = yaml_to_json(dumped[info.name], info.type);
  if (args.init_lora_weights != "gaussian") j["init_lora_weights"] = args.init_lora_weights == "true";
  if (j["rank_pattern"].is_null()) j["rank_pattern"] = nlohmann::json::object();
  if (j["alpha_pattern"].is_null()) j["alpha_pattern"] = nlohmann::json::object();
  return j;
}

PeftArgs read_adapter_config(const std::string& path) {
  if (!std::filesystem::exists(path)) throw ConfigError("'" + path + "' does not exist (a PEFT adapter directory holds adapter_config.json)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ConfigError(path + ": expected a JSON object of LoraConfig keys");
  const std::string type = j.value("peft_type", std::string("LORA"));
  if (type != "LORA")
    throw ConfigError(path + ": peft_type '" + type + "' is not built in hftrain (LORA adapters, with or without use_dora, are)");
  const std::vector<std::string> names = schema_of<PeftArgs>().names();
  YAML::Node node(YAML::NodeType::Map);
  for (const auto& [key, value] : j.items()) {
    if (std::find(names.begin(), names.end(), key) != names.end()) {
      node[key] = key == "init_lora_weights" && value.is_boolean() ? YAML::Node(value.get<bool>() ? "true" : "false")
                                                                   : json_to_yaml(value);
    } else if (!neutral(value) && std::find(kAcceptedAnyValue.begin(), kAcceptedAnyValue.end(), key) == kAcceptedAnyValue.end()) {
      throw ConfigError(path + ": '" + key + "' is " + value.dump() + ", a PEFT feature hftrain does not build (only its "
                        "neutral value, null / false / {}, is accepted)");
    }
  }
  Issues issues(path);
  PeftArgs args;
  schema_of<PeftArgs>().parse(node, "", args, issues);
  issues.throw_if_any();
  return args;
}

}  // namespace hftrain
