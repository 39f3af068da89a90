// The DeepSpeed keys hftrain knows without mapping them onto a section (hints and refused features),
// the optimizer and scheduler names and parameters, and the small value helpers the DeepSpeed config
// reader and resolver share. Internal to runspec/deepspeed_*.cpp. The names follow DeepSpeed's
// runtime/config.py and zero/config.py.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace hftrain::deepspeed {

// How hftrain treats a DeepSpeed key it does not map onto a section.
enum class KeyKind {
  hint,     // changes no result: accepted, with one log line saying so
  refused,  // a feature hftrain lacks: refused naming the key, unless it holds its neutral value
};
struct KnownKey {
  std::string name;
  KeyKind kind;
  std::string reason;
  std::string neutral = "";  // refused keys: the value (or, for a section, enabled: false) that asks for nothing
};

extern const std::vector<KnownKey> kTopLevelOthers;
extern const std::vector<KnownKey> kZeroOthers;
// The zero options whose DeepSpeed "auto" HF fills from the model's hidden size at stage 3.
extern const std::vector<std::string> kZeroFilledFromModel;
extern const std::vector<std::pair<std::string, std::string>> kOffloadOptimizerHints;
extern const std::vector<std::pair<std::string, std::string>> kOffloadParamHints;
extern const std::vector<std::pair<std::string, std::string>> kAioHints;
extern const std::vector<std::pair<std::string, std::string>> kActivationCheckpointingHints;
extern const std::map<std::string, std::string> kOptimizers;
extern const std::vector<std::string> kUnavailableOptimizers;
extern const std::vector<std::string> kMatchedOptimizerParams;
extern const std::map<std::string, std::vector<std::string>> kOptimizerParams;
extern const std::map<std::string, std::vector<std::string>> kSchedulerParams;

std::vector<std::string> names_of(const std::vector<KnownKey>& keys);
bool contains(const std::vector<std::string>& names, const std::string& name);
std::string lower(std::string s);

bool is_auto(const YAML::Node& n);
bool is_auto(const nlohmann::json& v);
// JSON of a YAML tree read from JSON text (or an inline spec mapping): quoted scalars stay strings,
// plain ones become null, booleans, integers or numbers when they read as such.
nlohmann::json to_json(const YAML::Node& n);
// A DeepSpeed number as the spec's option reads it: 5e8 or 2.0 for an integer option becomes "500000000" / "2".
YAML::Node spec_value(const YAML::Node& n);

}  // namespace hftrain::deepspeed
