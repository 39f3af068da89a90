// Files for the unit tests, declared once for all of them: a fresh scratch directory per test, a run spec or
// a file written whole, and the ConfigError message a call throws.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "util/error.h"

namespace hftrain_test {

// An empty directory of its own under the system's temporary one (removed first if a run left it).
inline std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A run spec written as `name` in this process's spec folder; returns its path.
inline std::string write_spec(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_specs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

inline void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The message of the ConfigError `fn` throws, or "<no ConfigError>".
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const hftrain::ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

}  // namespace hftrain_test
