// Issue collection and "did you mean" suggestions for run-spec validation (see issues.h).
#include "config/issues.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {

std::string Issues::position(const YAML::Node& node) const {
  if (node.IsDefined() && node.Mark().line >= 0) {
    return file_ + ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1);
  }
  return file_;
}

std::string Issues::where(const std::string& path, const YAML::Node& node) const {
  // The latest mark wins: a --set of a value moved from an HF name is located at the --set.
  for (auto it = origins_.rbegin(); it != origins_.rend(); ++it) {
    const std::string& o = it->first;
    if (path == o || path.rfind(o + ".", 0) == 0) return it->second;
  }
  return position(node);
}

void Issues::add(const std::string& path, const YAML::Node& node, const std::string& message) {
  messages_.push_back(where(path, node) + ": " + (path.empty() ? "" : path + ": ") + message);
}

void Issues::add(const std::string& path, const std::string& message) {
  messages_.push_back(file_ + ": " + (path.empty() ? "" : path + ": ") + message);
}

void Issues::throw_if_any() const {
  if (messages_.empty()) return;
  std::string text = "invalid run spec (" + std::to_string(messages_.size()) + " problem" +
                     (messages_.size() == 1 ? "" : "s") + "):";
  for (const auto& m : messages_) text += "\n  " + m;
  throw ConfigError(text);
}

std::string yaml_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

bool same_yaml_value(const YAML::Node& a, const YAML::Node& b) {
  if (a.IsScalar() && b.IsScalar()) {
    if (a.Scalar() == b.Scalar()) return true;
    try {
      return a.as<double>() == b.as<double>();
    } catch (const YAML::Exception&) {
    }
    try {
      return a.as<bool>() == b.as<bool>();
    } catch (const YAML::Exception&) {
    }
    return false;
  }
  return yaml_text(a) == yaml_text(b);
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Accept up to a third of the word's length in edits (at least 2): typos, not unrelated words.
  std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= limit ? best : "";
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string c = closest_name(word, candidates);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

}  // namespace hftrain
