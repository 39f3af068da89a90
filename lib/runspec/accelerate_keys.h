// The keys of an Accelerate config file, declared once: Accelerate's ClusterConfig fields and the keys of
// its deepspeed_config, fsdp_config and parallelism_config blocks (accelerate commands/config/config_args.py, commands/launch.py,
// utils/dataclasses.py), each with what hftrain does with it. Internal to runspec/accelerate_*.cpp; the
// table also feeds docs/distributed.md's list.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace hftrain::accelerate {

enum class Treatment {
  mapped,    // becomes a spec setting or a launch setting (text says which)
  accepted,  // changes nothing here: accepted, with one log line giving the reason (text)
  refused,   // a feature hftrain lacks: refused with the reason (text), unless the value asks for nothing
};

struct Key {
  std::string block;  // "" = top level, "deepspeed_config", "fsdp_config" or "parallelism_config"
  std::string name;
  Treatment treatment;
  std::string text;                       // mapped: what it becomes; accepted / refused: why
  std::vector<std::string> neutral = {};  // refused: values that ask for nothing (null, {} and [] always do)
};

const std::vector<Key>& keys();
// The key `name` of `block`, or nullptr.
const Key* find_key(const std::string& block, const std::string& name);
// The names of `block`'s keys (for did-you-mean).
std::vector<std::string> names_in(const std::string& block);
// Whether `value` asks for nothing for `key` (a refused key holding it is accepted).
bool is_neutral(const Key& key, const YAML::Node& value);

// deepspeed_config keys Accelerate refuses beside deepspeed_config_file (the JSON holds them), and the
// top-level mixed_precision with them.
extern const std::vector<std::string> kOwnedByDeepSpeedFile;

// Renamed keys Accelerate still reads: old name -> new name.
extern const std::vector<std::pair<std::string, std::string>> kRenamedFsdpKeys;

}  // namespace hftrain::accelerate
