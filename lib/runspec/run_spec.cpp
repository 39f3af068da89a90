// Loading, overriding and validating run specs (see run_spec.h; the dump: run_spec_dump.cpp).
#include "runspec/run_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "config/duplicate_keys.h"
#include "runspec/generation_sources.h"
#include "runspec/hf_flags.h"
#include "runspec/hf_model_args.h"
#include "runspec/hf_names.h"
#include "runspec/hf_unbuilt.h"
#include "runspec/model_families.h"
#include "runspec/quantized_checkpoint.h"
#include "runspec/rope_scaling.h"
#include "runspec/spec_rules.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/hub_ids.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace {

// What only the strict families build (ModelFamily::strict_config_keys: sliding windows, soft-caps, MoE
// keys...), option name -> a type that has it, less the options of every other family (the shared shape keys
// such as hidden_size): config.json keys that change the architecture, refused where a family lacks them.
std::map<std::string, std::string> architecture_options(const ComponentCatalog& catalog, const std::string& type) {
  std::map<std::string, std::string> strict;
  std::set<std::string> shared;
  for (const std::string& name : catalog.models.names()) {
    const ModelFamily* f = family_of_type(name);
    if (!f) continue;
    for (const auto& option : catalog.models.options(name)) {
      if (f->strict_config_keys && name != type) strict.emplace(option.name, name);
      if (!f->strict_config_keys || name == type) shared.insert(option.name);
    }
  }
  for (const auto& name : shared) strict.erase(name);
  return strict;
}

const std::vector<std::string> kTopLevelKeys = {"model",    "data",        "optimizer", "scheduler", "metrics",
                                                "callbacks", "training", "distributed", "zero",      "precision", "generation", "peft",
                                                "search"};

YAML::Node parse_yaml_file(const std::string& path) {
  std::ifstream probe(path);
  if (!probe) throw ConfigError("cannot read run spec '" + path + "': no such file or not readable");
  std::string text = read_text_file(path);
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": syntax error: " + e.msg);
  }
}

std::vector<std::string> split_dots(const std::string& key) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : key) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

void apply_override(YAML::Node& root, const std::string& assignment, Issues& issues) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set '" + assignment + "': expected dotted.key=value");
  }
  const std::string key = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set '" + assignment + "': value is not valid YAML: " + e.msg);
  }
  issues.mark_override(key);
  report_duplicate_keys(value, key, issues);
  auto parts = split_dots(key);
  for (const auto& p : parts)
    if (p.empty()) throw ConfigError("--set '" + assignment + "': empty key component");
  // Walk with fresh handles: yaml-cpp node assignment rebinds, so build a chain of nodes.
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    }
    if (!next.IsMap()) throw ConfigError("--set '" + assignment + "': '" + parts[i] + "' is not a section");
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
}

ComponentChoice parse_component(const YAML::Node& root, const std::string& section, const RegistryBase& registry,
                                const std::string& default_type, Issues& issues,
                                const std::vector<std::string>& extra_keys = {}) {
  ComponentChoice choice;
  YAML::Node node = lookup(root, section);
  if (node.IsDefined() && !node.IsNull() && !node.IsMap()) {
    issues.add(section, node, "expected a mapping with 'type' and its options");
    return choice;
  }
  YAML::Node type_node = lookup(node, "type");
  if (!type_node.IsDefined()) {
    if (default_type.empty()) {
      std::string list;
      for (const auto& n : registry.names()) list += (list.empty() ? "" : ", ") + n;
      issues.add(section + ".type", node, "required value is missing; valid types: " + list);
      return choice;
    }
    choice.type = default_type;
  } else if (!type_node.IsScalar()) {
    issues.add(section + ".type", type_node, "expected a component name");
    return choice;
  } else {
    choice.type = type_node.Scalar();
  }
  if (!registry.contains(choice.type)) {
    issues.add(section + ".type", type_node, registry.unknown_message(choice.type));
    choice.type.clear();
    return choice;
  }
  std::vector<std::string> reserved = {"type"};
  reserved.insert(reserved.end(), extra_keys.begin(), extra_keys.end());
  choice.options = registry.parse(choice.type, node, section, issues, reserved);
  return choice;
}

// The model section. With `from_pretrained: DIR` and DIR/config.json present (an HF model directory),
// the model type comes from config.json (model_type / architectures); `type` may be omitted and must
// agree when given. The options start from config.json's keys that are options of that type (HF names, or
// the family's spelling of an option: config_key_of_option; num_labels from id2label when absent) and the
// spec's own keys override them. Without config.json the type is required and the options are the spec's.
void parse_model_section(const YAML::Node& root, const ComponentCatalog& catalog, Issues& issues, ModelChoice& out,
                         std::map<std::string, std::string>& origins) {
  YAML::Node node = lookup(root, "model");
  YAML::Node fp = lookup(node, "from_pretrained");
  if (fp.IsDefined()) {
    if (!fp.IsScalar() || fp.Scalar().empty())
      issues.add("model.from_pretrained", fp, "expected a directory holding model.safetensors");
    else
      out.from_pretrained = fp.Scalar();
  }
  if (YAML::Node pa = lookup(node, "peft_adapter"); pa.IsDefined() && !pa.IsNull()) {
    if (!pa.IsScalar() || pa.Scalar().empty())
      issues.add("model.peft_adapter", pa, "expected a PEFT adapter directory (adapter_config.json + adapter_model.safetensors)");
    else if (!std::filesystem::exists(pa.Scalar() + "/adapter_config.json"))
      issues.add("model.peft_adapter", pa, "'" + pa.Scalar() + "' holds no adapter_config.json (a PEFT adapter directory, "
                 "as save_pretrained of a PeftModel writes it)");
    else
      out.peft_adapter = pa.Scalar();
  }
  const std::string config_path = out.from_pretrained + "/config.json";
  if (!out.from_pretrained.empty() && !std::filesystem::is_directory(out.from_pretrained)) {
    issues.add("model.from_pretrained", fp, "'" + out.from_pretrained + "' is not a directory (" + nothing_downloaded_hint() + ")");
    return;
  }
  if (!out.from_pretrained.empty() && !std::filesystem::exists(config_path) && !lookup(node, "type").IsDefined()) {
    issues.add("model.from_pretrained", fp, "'" + out.from_pretrained + "' has no config.json, so the model type is "
               "unknown: point at an HF model directory, or give model.type");
    return;
  }
  if (out.from_pretrained.empty() || !std::filesystem::exists(config_path) || !node.IsMap()) {
    static_cast<ComponentChoice&>(out) = parse_component(root, "model", catalog.models, "", issues, {"from_pretrained", "peft_adapter"});
    return;
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(config_path + ": not valid JSON: " + e.what());
  }
  const std::string type = model_type_from_config(config, config_path);
  config = with_v4_rope_keys(config, config_path);  // v5's rope_parameters as rope_theta / rope_scaling, checked
  // a bitsandbytes 4-bit checkpoint: its packed weights load as they are, under its quantization_config
  if (auto q = quantization_of_checkpoint(config, config_path, out.quantization)) out.quantization = std::move(q);
  if (YAML::Node t = lookup(node, "type"); t.IsDefined() && (!t.IsScalar() || t.Scalar() != type)) {
    issues.add("model.type", t, "'" + (t.IsScalar() ? t.Scalar() : std::string("?")) + "' disagrees with " + config_path +
                                    " (model_type '" + config.value("model_type", std::string()) + "' is hftrain type '" +
                                    type + "')");
    return;
  }
  if (!catalog.models.contains(type)) {
    issues.add("model.from_pretrained", fp, config_path + " describes model type '" + type + "', which is not registered");
    return;
  }
  std::vector<std::string> option_names;  // a strict family refuses the keys it does not build
  for (const auto& option : catalog.models.options(type)) option_names.push_back(option.name);
  check_config_keys(*family_of_type(type), config, config_path, option_names, architecture_options(catalog, type));
  YAML::Node merged(YAML::NodeType::Map);
  for (const auto& option : catalog.models.options(type)) {
    if (const std::string key = config_key_of_option(config, option.name); !key.empty()) {
      // an object (rope_scaling) or a list (layer_types) as the mapping / sequence a spec would hold
      YAML::Node v = config[key].is_structured() ? YAML::Load(config[key].dump()) : json_to_yaml_scalar(config[key]);
      if (v.IsDefined()) merged[option.name] = v;
    } else if (option.name == "num_labels" && config.contains("id2label") && config["id2label"].is_object()) {
      merged[option.name] = std::to_string(config["id2label"].size());
    }
    if (merged[option.name].IsDefined()) origins.emplace("model." + option.name, config_path);  // spec keys came first
  }
  origins.emplace("model.type", config_path);
  for (const auto& kv : node) merged[kv.first.Scalar()] = kv.second;
  merged["type"] = type;
  YAML::Node wrapper(YAML::NodeType::Map);
  wrapper["model"] = merged;
  static_cast<ComponentChoice&>(out) = parse_component(wrapper, "model", catalog.models, "", issues, {"from_pretrained", "peft_adapter"});
}

// Every key written in a section (or a whole list section) -> where it was written; values already moved
// from an HF name keep that origin.
void record_origins(const YAML::Node& root, const Issues& issues, std::map<std::string, std::string>& origins) {
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    if (!section.second.IsMap()) {
      origins.emplace(name, issues.where(name, section.first));
      continue;
    }
    for (const auto& kv : section.second) {
      const std::string path = name + "." + kv.first.Scalar();
      // A nested mapping whose keys were placed from another spelling (zero.offload_optimizer.device from
      // sharded_ddp or a ds_config) says where those came from.
      std::string placed;
      for (auto it = origins.lower_bound(path + "."); it != origins.end() && it->first.rfind(path + ".", 0) == 0; ++it)
        placed += (placed.empty() ? "" : "; ") + it->first.substr(path.size() + 1) + " from " + it->second;
      origins.emplace(path, placed.empty() ? issues.where(path, kv.first) : placed);
    }
  }
}

// The node at a dotted path of `root` (undefined when absent), for locating a check's problem.
YAML::Node node_at(const YAML::Node& root, const std::string& dotted) {
  YAML::Node n = root;
  for (const auto& part : split_dots(dotted)) n = lookup(n, part);
  return n;
}

// HF TrainingArguments holds what hftrain splits into sections: a `training` key that is an option of
// another section is pointed there (e.g. training.bf16 -> precision.bf16).
std::string training_key_hint(const std::string& key) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> sections = {
      {"distributed", schema_of<DistributedArgs>().names()},
      {"zero", schema_of<ZeroArgs>().names()},
      {"precision", schema_of<PrecisionArgs>().names()},
      {"generation", schema_of<GenerationArgs>().names()},
      {"data", schema_of<DataSampleLimits>().names()}};
  for (const auto& [section, names] : sections)
    for (const auto& n : names)
      if (n == key) return " (in hftrain it is " + section + "." + key + ")";
  return "";
}

template <class S>
void parse_section(const YAML::Node& root, const std::string& section, S& out, Issues& issues) {
  schema_of<S>().parse(lookup(root, section), section, out, issues);
}

}  // namespace

namespace {
RunSpec load_run_spec_from(YAML::Node root, const std::string& path, const std::vector<std::string>& overrides,
                           const ComponentCatalog& catalog, const std::vector<SpecCheck>& checks);
}  // namespace

std::string dotted_key_of_option(const std::string& key, const ComponentCatalog& catalog) {
  if (std::optional<HfFlag> flag = find_hf_flag(key)) return flag->key;
  const std::vector<std::pair<std::string, std::vector<std::string>>> sections = {
      {"distributed", schema_of<DistributedArgs>().names()},
      {"zero", schema_of<ZeroArgs>().names()},
      {"precision", schema_of<PrecisionArgs>().names()},
      {"generation", schema_of<GenerationArgs>().names()}};
  for (const auto& [section, names] : sections)
    if (std::find(names.begin(), names.end(), key) != names.end()) return section + "." + key;
  const std::vector<std::pair<std::string, const RegistryBase*>> components = {
      {"model", &catalog.models}, {"data", &catalog.data}, {"optimizer", &catalog.optimizers}, {"scheduler", &catalog.schedulers}};
  for (const auto& [section, registry] : components)
    for (const auto& type : registry->names())
      for (const auto& option : registry->options(type))
        if (option.name == key) return section + "." + key;
  return "";
}

RunSpec load_run_spec(const std::string& path, const std::vector<std::string>& overrides,
                      const ComponentCatalog& catalog, const std::vector<SpecCheck>& checks) {
  return load_run_spec_from(parse_yaml_file(path), path, overrides, catalog, checks);
}

std::string yaml_quoted(const std::string& text) {
  std::string q = "\"";
  for (char c : text) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

RunSpec load_run_spec_text(const std::string& text, const std::string& source, const ComponentCatalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(source + ": syntax error: " + e.msg);
  }
  return load_run_spec_from(root, source, {}, catalog, {});
}

namespace {

// The tree as the sections read it: the file's (its duplicate keys reported), the --set overrides, HF's
// names and the Accelerate and DeepSpeed files moved into place, and where each value came from.
void prepare_tree(YAML::Node& root, const std::string& path, const std::vector<std::string>& overrides, Issues& issues,
                  RunSpec& spec) {
  if (root.IsNull() || !root.IsDefined()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError(path + ": the run spec must be a mapping of sections (" + "model, data, training, ...)");
  report_duplicate_keys(root, "", issues);  // before --set, so that positions are the file's
  for (const auto& o : overrides) apply_override(root, o, issues);
  move_hf_training_names(root, issues, spec.origins, spec.notes);
  move_hf_model_arguments(root, issues, spec.origins, spec.notes);
  take_quantization_config(root, issues, spec.model.quantization);
  take_unbuilt_hf_fields(root, issues);
  apply_accelerate_config(root, issues, spec.origins, spec.notes, spec.accelerate);  // may set training.deepspeed
  apply_deepspeed_config(root, issues, spec.origins, spec.notes, spec.deepspeed);
  record_origins(root, issues, spec.origins);
}

void check_top_level_keys(const YAML::Node& root, const ComponentCatalog& catalog, Issues& issues) {
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    bool known = false;
    for (const auto& k : kTopLevelKeys) known = known || k == key;
    if (known) continue;
    const std::string option = dotted_key_of_option(key, catalog);
    issues.add(key, kv.first,
               "unknown section" + (option.empty() ? did_you_mean(key, kTopLevelKeys)
                                                   : " (did you mean '" + option + "'? keys are given with their section)"));
  }
}

// The sample limits: keys of the data section that no data source owns.
void parse_data_limits(const YAML::Node& root, RunSpec& spec, Issues& issues) {
  const YAML::Node data = lookup(root, "data");
  YAML::Node limits(YAML::NodeType::Map);
  for (const auto& name : schema_of<DataSampleLimits>().names())
    if (YAML::Node v = lookup(data, name); v.IsDefined()) limits[name] = v;
  schema_of<DataSampleLimits>().parse(limits, "data", spec.data_limits, issues);
}

void parse_training_section(const YAML::Node& root, RunSpec& spec, Issues& issues) {
  schema_of<TrainingArgs>().parse(lookup(root, "training"), "training", spec.training, issues, {}, [](const std::string& key) {
    const std::string other = training_key_hint(key);
    return other.empty() ? did_you_mean(key, schema_of<TrainingArgs>().names()) : other;
  });
}

// The generation section, after its sources (training.generation_*, generation_config.json) filled it.
void parse_generation_section(YAML::Node& root, RunSpec& spec, Issues& issues) {
  fill_generation_section(root, spec.training, spec.model.from_pretrained, issues, spec.origins, spec.generation_sources);
  for (const auto& problem : spec.generation_sources.unsupported)
    spec.notes.push_back(problem + " (predict, and training or eval with predict_with_generate, refuse to start; "
                         "training without generating is not affected)");
  parse_section(root, "generation", spec.generation, issues);
}

// The peft and search sections, each only when given.
void parse_optional_sections(const YAML::Node& root, const ComponentCatalog& catalog, RunSpec& spec, Issues& issues) {
  if (YAML::Node peft = lookup(root, "peft"); peft.IsDefined() && !peft.IsNull()) {
    spec.peft.emplace();
    parse_section(root, "peft", *spec.peft, issues);
  }
  if (YAML::Node search = lookup(root, "search"); search.IsDefined()) {
    spec.search.emplace();
    parse_search_section(search, issues, [&](const std::string& name) { return dotted_key_of_option(name, catalog); },
                         *spec.search);
    spec.notes.push_back("the search section is read by hftrain search only; this run trains the values of the spec and its --set overrides");
  }
}

// metrics[i]: a metric name, or {type: ..., name: ..., options}; two metrics may not report under one name.
void parse_metric(const YAML::Node& entry_node, const std::string& key, const ComponentCatalog& catalog, RunSpec& spec,
                  Issues& issues) {
  YAML::Node holder(YAML::NodeType::Map);
  if (entry_node.IsScalar()) {
    YAML::Node entry(YAML::NodeType::Map);
    entry["type"] = entry_node;
    holder[key] = entry;
  } else {
    holder[key] = entry_node;
  }
  MetricChoice choice;
  static_cast<ComponentChoice&>(choice) = parse_component(holder, key, catalog.metrics, "", issues, {"name"});
  if (choice.type.empty()) return;
  YAML::Node name = lookup(holder[key], "name");
  choice.key = name.IsDefined() && name.IsScalar() ? name.Scalar() : choice.type;
  for (const auto& other : spec.metrics)
    if (other.key == choice.key)
      issues.add(key, entry_node, "two metrics report as '" + choice.key + "'; give one a different 'name'");
  spec.metrics.push_back(choice);
}

void parse_metrics(const YAML::Node& root, const ComponentCatalog& catalog, RunSpec& spec, Issues& issues) {
  YAML::Node m = lookup(root, "metrics");
  if (!m.IsDefined() || m.IsNull()) return;
  if (!m.IsSequence()) {
    issues.add("metrics", m, "expected a list of metric names or {type: ..., name: ..., options}");
    return;
  }
  for (std::size_t i = 0; i < m.size(); ++i) parse_metric(m[i], "metrics[" + std::to_string(i) + "]", catalog, spec, issues);
}

void parse_callbacks(const YAML::Node& root, const ComponentCatalog& catalog, RunSpec& spec, Issues& issues) {
  YAML::Node cbs = lookup(root, "callbacks");
  if (!cbs.IsDefined() || cbs.IsNull()) return;
  if (!cbs.IsSequence()) {
    issues.add("callbacks", cbs, "expected a list of {type: ..., options}");
    return;
  }
  for (std::size_t i = 0; i < cbs.size(); ++i) {
    YAML::Node holder(YAML::NodeType::Map);
    const std::string key = "callbacks[" + std::to_string(i) + "]";
    holder[key] = cbs[i];
    ComponentChoice choice = parse_component(holder, key, catalog.callbacks, "", issues);
    if (!choice.type.empty()) spec.callbacks.push_back(choice);
  }
}

// Every section, in the order their problems are reported.
void parse_sections(YAML::Node& root, const ComponentCatalog& catalog, RunSpec& spec, Issues& issues) {
  parse_model_section(root, catalog, issues, spec.model, spec.origins);
  spec.data = parse_component(root, "data", catalog.data, "", issues, schema_of<DataSampleLimits>().names());
  parse_data_limits(root, spec, issues);
  spec.optimizer = parse_component(root, "optimizer", catalog.optimizers, "adamw", issues);
  spec.scheduler = parse_component(root, "scheduler", catalog.schedulers, "linear", issues);
  parse_training_section(root, spec, issues);
  parse_section(root, "distributed", spec.distributed, issues);
  parse_section(root, "zero", spec.zero, issues);
  parse_section(root, "precision", spec.precision, issues);
  parse_generation_section(root, spec, issues);
  parse_optional_sections(root, catalog, spec, issues);
  parse_metrics(root, catalog, spec, issues);
  parse_callbacks(root, catalog, spec, issues);
}

RunSpec load_run_spec_from(YAML::Node root, const std::string& path, const std::vector<std::string>& overrides,
                           const ComponentCatalog& catalog, const std::vector<SpecCheck>& checks) {
  Issues issues(path);
  RunSpec spec;
  prepare_tree(root, path, overrides, issues, spec);
  check_top_level_keys(root, catalog, issues);
  spec.source = path;
  parse_sections(root, catalog, spec, issues);
  check_spec_rules({spec, root, catalog, issues});
  for (const auto& check : checks)
    check(spec, [&](const std::string& key, const std::string& message) { issues.add(key, node_at(root, key), message); });
  issues.throw_if_any();
  return spec;
}

}  // namespace

}  // namespace hftrain
