// Dumping run specs: the resolved spec as YAML, with each written value's origin as a comment, and the copy a
// run saves with its input paths made absolute (see run_spec.h).
#include <algorithm>

#include "runspec/run_spec.h"

namespace hftrain {
namespace {

// YAML text of the dumped tree with each written value's origin as a comment after it.
std::string emit_with_origins(const YAML::Node& root, const std::map<std::string, std::string>& origins) {
  YAML::Emitter out;
  out << YAML::Comment("resolved run spec; a comment says where a value was written, values without one are defaults");
  out << YAML::BeginMap;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    out << YAML::Key << name << YAML::Value;
    if (!section.second.IsMap()) {
      out << section.second;
      continue;
    }
    out << YAML::BeginMap;
    for (const auto& kv : section.second) {
      auto it = origins.find(name + "." + kv.first.Scalar());
      out << YAML::Key << kv.first.Scalar() << YAML::Value;
      if (it != origins.end() && !kv.second.IsScalar()) out << YAML::Flow;  // keeps the comment on its line
      out << kv.second;
      if (it != origins.end()) out << YAML::Comment(it->second);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

std::string dump_run_spec(const RunSpec& spec, const ComponentCatalog& catalog, bool with_origins) {
  auto component = [](const ComponentChoice& c, const RegistryBase& r) {
    YAML::Node n(YAML::NodeType::Map);
    n["type"] = c.type;
    YAML::Node opts = r.dump(c.type, c.options);
    for (const auto& kv : opts) n[kv.first.Scalar()] = kv.second;
    return n;
  };
  YAML::Node root(YAML::NodeType::Map);
  root["model"] = component(spec.model, catalog.models);
  if (!spec.model.from_pretrained.empty()) root["model"]["from_pretrained"] = SavedSpecPaths::saved(spec.model.from_pretrained);
  if (!spec.model.peft_adapter.empty()) root["model"]["peft_adapter"] = SavedSpecPaths::saved(spec.model.peft_adapter);
  if (spec.model.quantization) root["model"]["quantization_config"] = schema_of<QuantizationArgs>().dump(*spec.model.quantization);
  root["data"] = component(spec.data, catalog.data);
  for (const auto& kv : schema_of<DataSampleLimits>().dump(spec.data_limits)) root["data"][kv.first.Scalar()] = kv.second;
  root["optimizer"] = component(spec.optimizer, catalog.optimizers);
  root["scheduler"] = component(spec.scheduler, catalog.schedulers);
  YAML::Node metrics(YAML::NodeType::Sequence);
  for (const auto& m : spec.metrics) {
    YAML::Node entry = component(m, catalog.metrics);
    entry["name"] = m.key;
    metrics.push_back(entry);
  }
  root["metrics"] = metrics;
  YAML::Node callbacks(YAML::NodeType::Sequence);
  for (const auto& cb : spec.callbacks) callbacks.push_back(component(cb, catalog.callbacks));
  root["callbacks"] = callbacks;
  root["training"] = schema_of<TrainingArgs>().dump(spec.training);
  root["distributed"] = schema_of<DistributedArgs>().dump(spec.distributed);
  root["zero"] = schema_of<ZeroArgs>().dump(spec.zero);
  root["precision"] = schema_of<PrecisionArgs>().dump(spec.precision);
  if (spec.peft) root["peft"] = schema_of<PeftArgs>().dump(*spec.peft);
  // The generation section keeps the keys the spec set itself: loading the dump again fills the others
  // from their sources (training.generation_*, generation_config.json), which eval / predict may change.
  // --dump-config lists the resolved values of the others as comments.
  const YAML::Node resolved = schema_of<GenerationArgs>().dump(spec.generation);
  YAML::Node given(YAML::NodeType::Map);
  const auto& given_keys = spec.generation_sources.given_keys;
  for (const auto& key : given_keys) given[key] = resolved[key];
  for (const auto& key : spec.generation_sources.cleared_keys) given[key] = YAML::Node(YAML::NodeType::Null);
  root["generation"] = given;
  if (with_origins) {
    std::string text = emit_with_origins(root, spec.origins);
    text += "# generation, the keys above and these, resolved from their sources (docs/generation.md):\n";
    for (const auto& kv : resolved) {
      const std::string key = kv.first.Scalar();
      if (std::find(given_keys.begin(), given_keys.end(), key) != given_keys.end()) continue;
      auto origin = spec.origins.find("generation." + key);
      text += "#   " + key + ": " + yaml_text(kv.second) + (origin == spec.origins.end() ? "" : "  (" + origin->second + ")") + "\n";
    }
    return text;
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::string saved_run_spec(const RunSpec& spec, const ComponentCatalog& catalog) {
  SavedSpecPaths absolute;
  return dump_run_spec(spec, catalog);
}

}  // namespace hftrain
