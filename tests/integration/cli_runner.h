// Helpers for integration tests: run the real hftrain binary and capture exit code + output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hftrain_test {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line; exit code (128 + signal when killed) and its stdout.
inline CliResult run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  int status = pipe ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Runs `hftrain <args>` in `cwd`, stdout and stderr together.
inline CliResult run_hftrain(const std::string& args, const std::string& cwd) {
  return run_shell("cd '" + cwd + "' && '" + std::string(HFTRAIN_BINARY) + "' " + args + " 2>&1");
}

// A fresh, empty directory under the system temp dir, named by the test and this process (each test case runs
// in its own process under ctest), so that two suites on one machine never share one.
inline std::string fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("hftrain_it_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A file's exact bytes ("" when it cannot be read), for bitwise comparisons.
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The training losses a run logged, in order (trainer_state.json's log_history entries with "loss").
inline std::vector<double> logged_losses(const std::string& trainer_state_path) {
  std::vector<double> out;
  const auto state = nlohmann::json::parse(read_text(trainer_state_path));
  for (const auto& entry : state.at("log_history"))
    if (entry.contains("loss")) out.push_back(entry["loss"].get<double>());
  return out;
}

}  // namespace hftrain_test
