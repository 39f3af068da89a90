// Shared by the unit tests of run-spec loading (HF arguments, DeepSpeed and Accelerate config files, sample
// limits): load a spec file through the built-in components, and the message of the ConfigError a step
// raises ("" when it raises none).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "builtins/register_builtins.h"
#include "util/error.h"

namespace hftrain_test {

inline hftrain::RunSpec load(const std::string& path, const std::vector<std::string>& overrides = {}) {
  return hftrain::load_run_spec(path, overrides, hftrain::builtin_components().catalog());
}

inline std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const hftrain::ConfigError& e) {
    return e.what();
  }
  return "";
}

inline std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  return config_error([&] { load(path, overrides); });
}

// True when one of the spec's notes (what loading logs) contains `text`.
inline bool has_note(const hftrain::RunSpec& spec, const std::string& text) {
  for (const auto& n : spec.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace hftrain_test
