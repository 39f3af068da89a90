// Type-erased registry operations shared by every Registry<Product, Args...> (see registry.h).
#include "registry/registry.h"

namespace hftrain {

std::vector<std::string> RegistryBase::names() const {
  std::vector<std::string> n;
  for (const auto& kv : entries_) n.push_back(kv.first);
  return n;
}

void RegistryBase::add_entry(const std::string& name, Entry entry) {
  if (entries_.count(name)) throw RuntimeFailure("duplicate " + kind_ + " component name '" + name + "'");
  entries_.emplace(name, std::move(entry));
}

const RegistryBase::Entry& RegistryBase::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(unknown_message(name));
  return it->second;
}

std::string RegistryBase::unknown_message(const std::string& name) const {
  std::string list;
  for (const auto& n : names()) list += (list.empty() ? "" : ", ") + n;
  return "unknown " + kind_ + " type '" + name + "'" + did_you_mean(name, names()) + "; valid types: " + list;
}

OptionsPtr RegistryBase::parse(const std::string& name, const YAML::Node& node, const std::string& path,
                               Issues& issues, const std::vector<std::string>& reserved) const {
  const Entry& e = entry(name);
  auto hint = [this, &name, &e](const std::string& key) -> std::string {
    std::string closest = closest_name(key, e.option_names);
    if (!closest.empty()) return " (did you mean '" + closest + "'?)";
    for (const auto& kv : entries_) {
      if (kv.first == name) continue;
      for (const auto& o : kv.second.option_names)
        if (o == key) return " for " + kind_ + " type '" + name + "': it is an option of type '" + kv.first + "'";
    }
    std::string list;
    for (const auto& o : e.option_names) list += (list.empty() ? "" : ", ") + o;
    return " for " + kind_ + " type '" + name + "' (its options: " + (list.empty() ? "none" : list) + ")";
  };
  return e.parse(node, path, issues, reserved, hint);
}

}  // namespace hftrain
