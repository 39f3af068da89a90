// Collects every problem found while validating a run spec, so the user sees all of them at once.
// Each issue names the file, line:column, dotted key path and what is wrong.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace hftrain {

class Issues {
 public:
  explicit Issues(std::string file) : file_(std::move(file)) {}

  // Records a problem at `path` (dotted key) located at `node`'s position in the file.
  void add(const std::string& path, const YAML::Node& node, const std::string& message);
  void add(const std::string& path, const std::string& message);  // no position known
  // A problem located by the caller (`where`: "file:line:col" of another file).
  void add_at(const std::string& where, const std::string& path, const std::string& message) {
    messages_.push_back(where + ": " + (path.empty() ? "" : path + ": ") + message);
  }

  bool empty() const { return messages_.empty(); }
  const std::vector<std::string>& messages() const { return messages_; }
  const std::string& file() const { return file_; }

  // Paths that were set by --set on the command line instead of the file.
  void mark_override(const std::string& path) { mark_origin(path, "--set " + path); }
  // Paths (and everything under them) whose value was written elsewhere than at their node: problems
  // at them are located at `where` (e.g. "--set x.y", or "spec.yaml:7:3 (training.optim)").
  void mark_origin(const std::string& path, const std::string& where) { origins_.push_back({path, where}); }

  // Where the value at `path` / `node` was written: its origin when marked, else file:line:col.
  std::string where(const std::string& path, const YAML::Node& node) const;
  // file:line:col of `node` (the file alone when the node has no position).
  std::string position(const YAML::Node& node) const;

  // Takes over `other`'s problems (already located in its own file), e.g. those of an included file.
  void absorb(const Issues& other) { messages_.insert(messages_.end(), other.messages_.begin(), other.messages_.end()); }

  // Throws ConfigError listing every issue when there is at least one.
  void throw_if_any() const;

 private:
  std::string file_;
  std::vector<std::string> messages_;
  std::vector<std::pair<std::string, std::string>> origins_;  // path -> where it was written
};

// map[key] that is always safe to inspect: a missing key (or a non-map parent) gives an Undefined node
// instead of yaml-cpp's "zombie" node, whose IsMap()/Mark() would throw.
inline YAML::Node lookup(const YAML::Node& map, const std::string& key) {
  if (map.IsDefined() && map.IsMap()) {
    YAML::Node child = map[key];
    if (child.IsDefined()) return child;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// A value as the user wrote it: a scalar's text, anything else in YAML flow style ("[0.9, 0.999]").
std::string yaml_text(const YAML::Node& n);
// Two spellings of one value agree: the same text, or the same number / boolean written differently.
bool same_yaml_value(const YAML::Node& a, const YAML::Node& b);

// Levenshtein distance based suggestion: the closest of `candidates` to `word`, or "" if none is close.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace hftrain
