// Duplicate-key detection over a parsed YAML / JSON tree (see duplicate_keys.h).
#include "config/duplicate_keys.h"

#include <map>

namespace hftrain {

void report_duplicate_keys(const YAML::Node& node, const std::string& path, Issues& issues) {
  auto join = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (node.IsMap()) {
    std::map<std::string, YAML::Node> first_seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;  // complex keys are reported elsewhere as unknown keys
      const std::string key = kv.first.Scalar();
      auto [it, inserted] = first_seen.emplace(key, kv.first);
      if (!inserted)
        issues.add(join(key), kv.first,
                   "duplicate key: given at " + issues.where(join(key), it->second) + " and again at " +
                       issues.where(join(key), kv.first) + " (only one would be used); remove one");
      report_duplicate_keys(kv.second, join(key), issues);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) report_duplicate_keys(node[i], path + "[" + std::to_string(i) + "]", issues);
  }
}

}  // namespace hftrain
