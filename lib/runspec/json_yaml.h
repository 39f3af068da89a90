// JSON values (config.json, adapter_config.json, generation_config.json) as the YAML nodes a run spec holds.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace hftrain {

// The whole value: objects as maps, arrays as sequences, null as null, strings as strings, numbers and
// booleans as their JSON text (which YAML reads back the same).
YAML::Node json_to_yaml(const nlohmann::json& v);

// A scalar only (string, boolean, number) as the YAML scalar a spec would hold; null, arrays and objects give
// an undefined node.
YAML::Node json_to_yaml_scalar(const nlohmann::json& v);

}  // namespace hftrain
