// config.json from a family's declared options (see family.h).
#include "models/family.h"

#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace {

// A schema-dumped value as JSON, by the option's declared type name ("integer", "number or null",
// "list of integer", ...); mappings (rope_scaling) as JSON objects of their scalars.
nlohmann::json typed_json(const YAML::Node& n, const std::string& type) {
  if (n.IsNull() || !n.IsDefined()) return nullptr;
  if (ends_with(type, " or null")) return typed_json(n, type.substr(0, type.size() - 8));
  if (n.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    const std::string element = starts_with(type, "list of ") ? type.substr(8) : "";
    for (const auto& item : n) out.push_back(typed_json(item, element));
    return out;
  }
  if (n.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : n) out[kv.first.Scalar()] = typed_json(kv.second, "");
    return out;
  }
  const std::string& s = n.Scalar();
  if (type == "integer") return n.as<int64_t>();
  if (type == "number") return n.as<double>();
  if (type == "bool") return n.as<bool>();
  if (type == "string" || starts_with(type, "one of")) return s;
  // an untyped scalar inside a mapping: a bool, an integer, a number, else the text
  bool b;
  if (s == "true" || s == "false") return YAML::convert<bool>::decode(n, b) ? nlohmann::json(b) : nlohmann::json(s);
  try {
    std::size_t used = 0;
    const long long i = std::stoll(s, &used);
    if (used == s.size()) return static_cast<int64_t>(i);
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

}  // namespace

nlohmann::json config_from_options(const ModelFamily& family, const YAML::Node& dumped,
                                   const std::vector<OptionInfo>& described) {
  nlohmann::json out = {{"model_type", family.model_type}, {"torch_dtype", "float32"}};
  if (!family.architectures.empty()) out["architectures"] = {family.architectures.front()};
  for (const OptionInfo& option : described) {
    auto renamed = family.option_config_keys.find(option.name);
    const std::string key = renamed == family.option_config_keys.end() ? option.name : renamed->second;
    out[key] = typed_json(dumped[option.name], option.type);
  }
  return out;
}

}  // namespace hftrain
