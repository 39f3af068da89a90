// Attaching LoRA / DoRA adapters to a model as PEFT's LoraModel does (see lora.h).
#include "models/lora.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>

#include "log/run_summary.h"
#include "models/adaptable_linear.h"
#include "util/error.h"

namespace hftrain {
namespace {

bool ends_with_component(const std::string& name, const std::string& key) {
  return name == key || (name.size() > key.size() && name.compare(name.size() - key.size(), key.size(), key) == 0 &&
                         name[name.size() - key.size() - 1] == '.');
}

std::regex compile(const std::string& pattern, const std::string& key) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError(key + ": '" + pattern + "' is not a valid regular expression (" + e.what() + ")");
  }
}

// PEFT's target matching: one string is a regex the whole name must match; a list entry matches a name
// equal to it or ending with "." + it.
struct ModuleMatcher {
  ModuleMatcher(const TargetModules& t, const std::string& key) : targets(t) {
    if (t.single) regex = compile(t.patterns.front(), key);
  }
  bool matches(const std::string& name) const {
    if (!targets.given()) return false;
    if (targets.single) return std::regex_match(name, regex);
    for (const auto& p : targets.patterns)
      if (ends_with_component(name, p)) return true;
    return false;
  }
  TargetModules targets;
  std::regex regex;
};

// The block index in a module name (PEFT's layers_pattern; default: layers, h, block, blocks, layer).
std::optional<int64_t> layer_index(const std::string& name, const std::optional<std::string>& pattern) {
  static const std::regex common(R"((?:^|.*\.)(?:layers|h|block|blocks|layer)\.(\d+)\..*)");
  std::smatch m;
  if (pattern) {
    const std::regex own("(?:^|.*\\.)" + *pattern + R"(\.(\d+)\..*)");
    if (std::regex_match(name, m, own)) return std::stoll(m[1]);
    return std::nullopt;
  }
  if (std::regex_match(name, m, common)) return std::stoll(m[1]);
  return std::nullopt;
}

// rank_pattern / alpha_pattern: the first key matching (.*\.)?key$.
template <class V>
std::optional<V> pattern_value(const std::map<std::string, V>& patterns, const std::string& name, const std::string& key) {
  for (const auto& [pattern, value] : patterns)
    if (std::regex_match(name, compile("(.*\\.)?" + pattern, key))) return value;
  return std::nullopt;
}


using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;

bool is_linear(const torch::nn::Module& m) { return dynamic_cast<const AdaptableLinearImpl*>(&m) != nullptr; }

// PEFT's default targets of the model's family when the section names none.
void default_targets(PeftArgs& args, const Model& model, const std::string& model_type, const std::string& key) {
  if (args.target_modules.given()) return;
  const ModelFamily* family = model.family() ? model.family() : family_of_type(model_type);
  if (!family || family->lora_target_modules.empty())
    throw ConfigError(key + ": model type '" + model_type + "' has no PEFT default targets; name the modules to adapt "
                      "(a list such as [c_fc], a regular expression, or all-linear)");
  args.target_modules = TargetModules{false, family->lora_target_modules};
}

// The linear layers target_modules names, in module order (all-linear: every one but a classification head).
std::vector<std::string> target_names(const PeftArgs& args, const NamedModules& modules, bool sequence_classification,
                                      const std::string& model_type, const std::string& key) {
  std::vector<std::string> targets;
  if (args.target_modules.single && args.target_modules.patterns.front() == "all-linear") {
    for (const auto& [name, m] : modules)
      if (is_linear(*m) && !(sequence_classification && (name == "classifier" || name == "score"))) targets.push_back(name);
    return targets;
  }
  const ModuleMatcher matcher(args.target_modules, key);
  for (const auto& [name, m] : modules) {
    if (!matcher.matches(name)) continue;
    if (!is_linear(*m)) throw ConfigError(key + ": '" + name + "' is not a linear layer (LoRA adapts nn.Linear and Conv1D layers)");
    targets.push_back(name);
  }
  if (!args.target_modules.single) {  // each listed name must name something
    for (const auto& p : args.target_modules.patterns) {
      bool found = false;
      for (const auto& [name, m] : modules) found = found || ends_with_component(name, p);
      if (!found) throw ConfigError(key + ": '" + p + "' matches no module of model '" + model_type + "'");
    }
  } else if (targets.empty()) {
    throw ConfigError(key + ": '" + args.target_modules.patterns.front() + "' matches no module of model '" + model_type + "'");
  }
  return targets;
}

// The targets left after exclude_modules and layers_to_transform.
std::vector<std::string> chosen_targets(const PeftArgs& args, const std::vector<std::string>& targets, const std::string& where) {
  const ModuleMatcher excluded(args.exclude_modules, where + ".exclude_modules");
  std::vector<std::string> chosen;
  for (const auto& name : targets) {
    if (excluded.matches(name)) continue;
    if (args.layers_to_transform) {
      const auto index = layer_index(name, args.layers_pattern);
      const auto& wanted = args.layers_to_transform->indices;
      if (!index || std::find(wanted.begin(), wanted.end(), *index) == wanted.end()) continue;
    }
    chosen.push_back(name);
  }
  if (chosen.empty())
    throw ConfigError(where + ": no layer is left to adapt (target_modules, exclude_modules and layers_to_transform select none)");
  return chosen;
}

// Attaches an adapter to each chosen layer (rank and alpha from their patterns) and sets fan_in_fan_out from
// the layers' layout as PEFT does, with a note when that changes the section's value.
void attach_adapters(PeftArgs& args, const NamedModules& modules, const std::vector<std::string>& chosen,
                     const std::string& where, AdapterDescription& description, AdapterSummary& summary) {
  bool forced_fan_in_fan_out = false, cleared_fan_in_fan_out = false;
  for (const auto& name : chosen) {
    AdaptableLinearImpl* layer = nullptr;
    for (const auto& [n, m] : modules)
      if (n == name) layer = dynamic_cast<AdaptableLinearImpl*>(m.get());
    if (layer->layout() == AdaptableLinearImpl::Layout::kInOut) forced_fan_in_fan_out = forced_fan_in_fan_out || !args.fan_in_fan_out;
    else cleared_fan_in_fan_out = cleared_fan_in_fan_out || args.fan_in_fan_out;
    const int64_t r = pattern_value(args.rank_pattern, name, where + ".rank_pattern").value_or(args.r);
    if (r < 1) throw ConfigError(where + ".rank_pattern: rank " + std::to_string(r) + " for '" + name + "' must be >= 1");
    const double alpha = pattern_value(args.alpha_pattern, name, where + ".alpha_pattern").value_or(args.lora_alpha);
    const double scaling = args.use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
    layer->attach_adapter(r, scaling, args.lora_dropout, args.use_dora, args.init_lora_weights);
    description.adapted_modules.insert(name);
  }
  if (forced_fan_in_fan_out) {
    args.fan_in_fan_out = true;
    summary.notes.push_back("fan_in_fan_out is set to true: the targets are Conv1D layers (PEFT does the same)");
  } else if (cleared_fan_in_fan_out) {
    args.fan_in_fan_out = false;
    summary.notes.push_back("fan_in_fan_out is set to false: the targets are nn.Linear layers (PEFT does the same)");
  }
}

// The name prefixes of the modules_to_save modules (each must name one).
std::set<std::string> saved_module_prefixes(const std::vector<std::string>& modules_to_save, const NamedModules& modules,
                                            const std::string& model_type, const std::string& where) {
  std::set<std::string> save_prefixes;
  for (const auto& m : modules_to_save) {
    bool found = false;
    for (const auto& [name, module] : modules)
      if (ends_with_component(name, m)) {
        save_prefixes.insert(name + ".");
        found = true;
      }
    if (!found) throw ConfigError(where + ".modules_to_save: '" + m + "' matches no module of model '" + model_type + "'");
  }
  return save_prefixes;
}

// What trains: the adapters, modules_to_save whole, and the biases `bias` names; the counts PEFT prints.
void mark_trainable(Model& model, const PeftArgs& args, const std::set<std::string>& save_prefixes,
                    AdapterDescription& description, AdapterSummary& summary) {
  int64_t copies = 0;
  for (auto& np : model.named_parameters()) {
    const std::string& n = np.key();
    const auto dot = n.rfind('.');
    const std::string module = dot == std::string::npos ? "" : n.substr(0, dot), leaf = n.substr(dot + 1);
    bool in_saved_module = false;
    for (const auto& p : save_prefixes) in_saved_module = in_saved_module || n.rfind(p, 0) == 0;
    const bool lora = leaf == "lora_magnitude_vector" || n.find(".lora_A.") != std::string::npos ||
                      n.find(".lora_B.") != std::string::npos;
    const bool bias = leaf == "bias" && (args.bias == "all" || (args.bias == "lora_only" && description.adapted_modules.count(module)));
    const bool trains = lora || in_saved_module || bias;
    np.value().set_requires_grad(trains);
    // A 4-bit base weight holds two codes a byte: PEFT counts a Params4bit as twice its uint8 elements.
    const int64_t count = np.value().scalar_type() == torch::kByte ? 2 * np.value().numel() : np.value().numel();
    summary.all += count;
    if (in_saved_module) copies += count;
    if (trains) {
      summary.trainable += np.value().numel();
      description.saved.push_back(n);
    }
  }
  summary.all += copies;  // PEFT keeps the original of each modules_to_save module beside its trained copy
}

}  // namespace

std::string AdapterSummary::line() const {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.4f", all > 0 ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0);
  return "trainable params: " + thousands(trainable) + " || all params: " + thousands(all) + " || trainable%: " + pct;
}

AdapterSummary attach_lora(Model& model, const std::string& model_type, PeftArgs args, const std::string& where) {
  const std::string key = where + ".target_modules";
  default_targets(args, model, model_type, key);
  const bool sequence_classification = args.task_type && *args.task_type == "SEQ_CLS";
  std::vector<std::string> modules_to_save = args.modules_to_save.value_or(std::vector<std::string>{});
  NamedModules modules;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) modules.emplace_back(item.key(), item.value());
  if (sequence_classification)  // PeftModelForSequenceClassification trains and saves the head
    for (const std::string head : {"classifier", "score"})
      for (const auto& [name, m] : modules)
        if (name == head && std::find(modules_to_save.begin(), modules_to_save.end(), head) == modules_to_save.end())
          modules_to_save.push_back(head);

  const bool all_linear = args.target_modules.single && args.target_modules.patterns.front() == "all-linear";
  const std::vector<std::string> chosen =
      chosen_targets(args, target_names(args, modules, sequence_classification, model_type, key), where);
  AdapterSummary summary;
  auto description = std::make_shared<AdapterDescription>();
  attach_adapters(args, modules, chosen, where, *description, summary);
  if (all_linear) args.target_modules = TargetModules{false, chosen};

  const std::set<std::string> save_prefixes = saved_module_prefixes(modules_to_save, modules, model_type, where);
  if (!modules_to_save.empty()) args.modules_to_save = modules_to_save;
  mark_trainable(model, args, save_prefixes, *description, summary);
  summary.adapted_layers = chosen.size();
  description->config = adapter_config_json(args);
  model.set_adapter(description);
  return summary;
}

void merge_adapter_into(const Model& adapted, Model& plain) {
  const AdapterDescription* adapter = adapted.adapter();
  if (!adapter) throw RuntimeFailure("merging an adapter: the model carries none");
  torch::NoGradGuard no_grad;
  auto plain_parameters = plain.named_parameters();
  auto target = [&](const std::string& name) -> torch::Tensor {
    const torch::Tensor* t = plain_parameters.find(name);
    if (!t) throw RuntimeFailure("merging an adapter: the base model has no tensor '" + name + "'");
    return *t;
  };
  for (const auto& item : adapted.named_modules("", /*include_self=*/false)) {
    const auto* linear = dynamic_cast<const AdaptableLinearImpl*>(item.value().get());
    // a 4-bit base's other layers too: the adapters were trained over their dequantised weights
    if (!adapter->adapted_modules.count(item.key()) && !(linear && linear->quantized())) continue;
    const auto& layer = *linear;
    const torch::Tensor merged = layer.merged_weight_out_in();
    torch::Tensor w = target(item.key() + ".weight");
    w.copy_(layer.layout() == AdaptableLinearImpl::Layout::kOutIn ? merged : merged.t());
  }
  for (const auto& np : adapted.named_parameters()) {  // trained modules_to_save and biases
    const std::string& n = np.key();
    if (!adapter->holds(n) || n.find(".lora_") != std::string::npos) continue;
    target(n).copy_(np.value());
  }
}

}  // namespace hftrain
