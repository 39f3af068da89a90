// Comparing a resumed run with its checkpoint (see resume_changes.h).
#include "train/resume_changes.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "util/error.h"

namespace hftrain {
namespace {

// The options that say how this run resumes, not how it trains.
bool about_resuming(const std::string& name) {
  static const char* const kNames[] = {"training.resume_from_checkpoint", "training.overwrite_output_dir",
                                       "training.resume_over_newer_model", "distributed.nproc_per_node"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// A number as its shortest text that reads back to the same double (the dump writes 17 digits:
// 0.0030000000000000001); other scalars as written.
std::string shortest(const std::string& text) {
  if (text.find_first_of(".eE") == std::string::npos) return text;  // an integer (or not a number)
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return text;
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return text;
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return shortest(node.Scalar());
  if (node.IsNull()) return "null";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// Every leaf of `node` (a scalar, or a sequence of scalars as one value) by its dotted name, in order.
void flatten(const YAML::Node& node, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
    return;
  }
  if (node.IsSequence()) {
    const bool of_maps = std::any_of(node.begin(), node.end(), [](const YAML::Node& n) { return n.IsMap(); });
    if (of_maps) {
      for (std::size_t i = 0; i < node.size(); ++i) flatten(node[i], prefix + "[" + std::to_string(i) + "]", out);
      return;
    }
  }
  out.emplace_back(prefix, scalar_text(node));
}

std::vector<std::pair<std::string, std::string>> leaves(const std::string& yaml, const char* what) {
  std::vector<std::pair<std::string, std::string>> out;
  try {
    flatten(YAML::Load(yaml), "", out);
  } catch (const YAML::Exception& e) {
    throw RuntimeFailure(std::string(what) + " is not YAML: " + e.what());
  }
  return out;
}

}  // namespace

std::vector<SettingChange> spec_changes(const std::string& saved_yaml, const std::string& current_yaml) {
  const auto saved_list = leaves(saved_yaml, "the checkpoint's run_spec.yaml");
  const auto now_list = leaves(current_yaml, "the run spec");
  std::map<std::string, std::string> saved(saved_list.begin(), saved_list.end());
  std::vector<SettingChange> out;
  for (const auto& [name, value] : now_list) {
    if (about_resuming(name)) continue;
    auto it = saved.find(name);
    if (it == saved.end()) out.push_back({name, "(absent)", value});
    else if (it->second != value) out.push_back({name, it->second, value});
    if (it != saved.end()) saved.erase(it);
  }
  for (const auto& [name, value] : saved_list)
    if (saved.count(name) && !about_resuming(name)) out.push_back({name, value, "(absent)"});
  return out;
}

std::vector<SettingChange> layout_changes(const LayoutFigures& saved, const LayoutFigures& now) {
  std::vector<SettingChange> out;
  auto add = [&](const char* name, int64_t a, int64_t b) {
    if (a != b) out.push_back({name, std::to_string(a), std::to_string(b)});
  };
  add("world size", saved.world_size, now.world_size);
  add("global batch size", saved.global_batch, now.global_batch);
  add("max_steps (the step the run ends at)", saved.max_steps, now.max_steps);
  return out;
}

std::string describe_resume_changes(const std::string& checkpoint_dir, const std::vector<SettingChange>& changes) {
  if (changes.empty()) return "resuming " + checkpoint_dir + ": the same settings as the checkpoint's run";
  std::string text = "resuming " + checkpoint_dir + " with " + std::to_string(changes.size()) +
                     (changes.size() == 1 ? " change" : " changes") + " against the checkpoint's run:";
  for (const auto& c : changes) text += "\n  " + c.name + ": " + c.saved + " -> " + c.now;
  return text;
}

}  // namespace hftrain
