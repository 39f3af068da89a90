// JSON values as run-spec YAML nodes (see json_yaml.h).
#include "runspec/json_yaml.h"

namespace hftrain {

YAML::Node json_to_yaml(const nlohmann::json& v) {
  if (v.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (v.is_object()) {
    YAML::Node m(YAML::NodeType::Map);
    for (auto it = v.begin(); it != v.end(); ++it) m[it.key()] = json_to_yaml(it.value());
    return m;
  }
  if (v.is_array()) {
    YAML::Node s(YAML::NodeType::Sequence);
    for (const auto& e : v) s.push_back(json_to_yaml(e));
    return s;
  }
  if (v.is_string()) return YAML::Node(v.get<std::string>());
  return YAML::Node(v.dump());
}

YAML::Node json_to_yaml_scalar(const nlohmann::json& v) {
  if (v.is_string()) return YAML::Node(v.get<std::string>());
  if (v.is_boolean()) return YAML::Node(v.get<bool>() ? "true" : "false");
  if (v.is_number()) return YAML::Node(v.dump());
  return YAML::Node();
}

}  // namespace hftrain
