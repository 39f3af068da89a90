// Rotary scaling as HF configs write it (transformers' modeling_rope_utils `rope_type`s): the config.json
// `rope_scaling` object (transformers 4.x; `type` is the older spelling of `rope_type`) or v5's
// `rope_parameters` (rope_theta and the scaling together), read into RopeParameters and checked: a type
// hftrain does not build is refused by name, and a key the chosen type does not read is refused by name.
// No LibTorch: the run spec reads config.json with it; models/rotary computes the frequencies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/schema.h"

namespace hftrain {

// A model option holding the rope_scaling object as written (null = none, HF's default rotary), so that
// config.json gets it back as it was given.
struct RopeScaling {
  nlohmann::json value;  // null or an object
  bool operator==(const RopeScaling& o) const { return value == o.value; }
};

// The parameters of one rope_type, with HF's defaults filled in.
struct RopeParameters {
  std::string type = "default";  // default, linear, dynamic, llama3, yarn, longrope
  double factor = 1.0;           // linear / dynamic / llama3 / yarn; longrope's optional factor
  bool factor_given = false;
  double low_freq_factor = 0.0, high_freq_factor = 0.0;               // llama3
  std::optional<int64_t> original_max_position_embeddings;           // llama3 (required), yarn, longrope
  std::optional<double> attention_factor;                             // yarn, longrope
  double beta_fast = 32.0, beta_slow = 1.0;                           // yarn
  std::optional<double> mscale, mscale_all_dim;                       // yarn (DeepSeek's attention factor)
  bool truncate = true;                                               // yarn: integer correction range
  std::vector<double> short_factor, long_factor;                      // longrope, one per frequency
};

// The rope_types hftrain builds, for messages: "default, linear, dynamic, llama3, yarn, longrope".
std::string built_rope_types();

// Reads a rope_scaling object (null = default). Returns "" and fills `out`, or a problem naming the key
// (an unknown or unbuilt rope_type, a missing or unused key, a value of the wrong kind).
std::string read_rope_parameters(const nlohmann::json& rope_scaling, RopeParameters& out);

// config.json as transformers 4.x writes it, from either version's: v5's `rope_parameters` becomes
// `rope_theta` and `rope_scaling` (null for the default type), a Phi-3-style top-level
// original_max_position_embeddings goes into a longrope rope_scaling, and the result is checked. Throws
// ConfigError naming `config_path` and the key. Configs of families without rotary embeddings come back as
// they are.
nlohmann::json with_v4_rope_keys(const nlohmann::json& config, const std::string& config_path);

// config.json's rope_scaling for the option: as given, with rope_type beside an older `type` (as
// transformers 4.x writes it back); null when none.
nlohmann::json rope_scaling_json(const RopeScaling& scaling);

// v5's rope_parameters for a rope_theta and rope_scaling (written beside rope_scaling when saving).
nlohmann::json rope_parameters_json(double rope_theta, const RopeScaling& scaling);

template <>
struct ValueTraits<RopeScaling> {
  static std::string name() { return "rope_scaling mapping or null"; }
  static bool parse(const YAML::Node& n, RopeScaling& out);
  static YAML::Node dump(const RopeScaling& v);
};

}  // namespace hftrain
