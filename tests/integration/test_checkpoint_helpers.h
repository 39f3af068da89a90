// Helpers for the checkpoint integration tests: running the binary with an environment, spawning it in
// the background (to signal it), and comparing runs (log_history entries, file bytes, directory trees).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"

namespace hftrain_test {

// A fresh directory unique to this test process (several builds may run the suite at once), removed
// when the process exits.
inline std::string scratch_dir(const std::string& name) {
  struct Registry {
    std::vector<std::string> dirs;
    ~Registry() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Registry registry;
  const std::string dir = fresh_dir(name + "_" + std::to_string(getpid()));
  registry.dirs.push_back(dir);
  return dir;
}

// Runs `hftrain <args>` in `cwd` with HFTRAIN_FAULT_INJECT=<fault> (unset when empty).
inline CliResult run_with_fault(const std::string& fault, const std::string& args, const std::string& cwd) {
  const std::string env = fault.empty() ? "env -u HFTRAIN_FAULT_INJECT " : "env HFTRAIN_FAULT_INJECT='" + fault + "' ";
  return run_shell("cd '" + cwd + "' && " + env + "'" + std::string(HFTRAIN_BINARY) + "' " + args + " 2>&1");
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every regular file under `dir`, relative path -> bytes.
inline std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[std::filesystem::relative(e.path(), dir).string()] = file_bytes(e.path().string());
  return out;
}

// The training-log entries (those with "loss") of a trainer_state.json, keyed by step.
inline std::map<int64_t, nlohmann::json> train_logs(const nlohmann::json& state) {
  std::map<int64_t, nlohmann::json> out;
  for (const auto& e : state.at("log_history"))
    if (e.contains("loss")) out[e.at("step").get<int64_t>()] = e;
  return out;
}

// Names of entries of `dir` starting with ".checkpoint-" (crash leftovers).
inline std::vector<std::string> hidden_leftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".checkpoint-", 0) == 0) out.push_back(n);
  }
  return out;
}

inline void copy_tree(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(std::filesystem::path(to).parent_path());
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

// A background hftrain process with stdout + stderr going to <cwd>/<log>.
struct Background {
  pid_t pid = -1;
  std::string log_path;
  int exit_code = -1;  // set once reaped
  bool reaped = false;
};

inline int decode_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

inline Background spawn_hftrain(const std::vector<std::string>& args, const std::string& cwd, const std::string& fault,
                                const std::string& log = "run.log") {
  Background b;
  b.log_path = cwd + "/" + log;
  std::fflush(nullptr);  // so the child does not repeat the parent's buffered output
  b.pid = fork();
  if (b.pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(120);
    FILE* f = freopen(log.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), STDERR_FILENO) < 0) _exit(121);
    if (fault.empty()) unsetenv("HFTRAIN_FAULT_INJECT");
    else setenv("HFTRAIN_FAULT_INJECT", fault.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>("hftrain"));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HFTRAIN_BINARY, argv.data());
    _exit(122);
  }
  return b;
}

// Waits up to `timeout_s` for the process; returns its exit code (128 + signal when killed), or -1 on
// timeout (the process is then SIGKILLed and reaped).
inline int wait_for(Background& b, double timeout_s) {
  if (b.reaped) return b.exit_code;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = waitpid(b.pid, &status, WNOHANG);
    if (r == b.pid) {
      b.reaped = true;
      return b.exit_code = decode_status(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(b.pid, SIGKILL);
  waitpid(b.pid, &status, 0);
  return -1;
}

// Polls the log until `pattern` occurs `count` times (true) or `timeout_s` passes / the process ends.
inline bool wait_for_log(Background& b, const std::string& pattern, int count, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = file_bytes(b.log_path);
    int n = 0;
    for (std::size_t p = text.find(pattern); p != std::string::npos; p = text.find(pattern, p + 1)) ++n;
    if (n >= count) return true;
    int status;
    if (waitpid(b.pid, &status, WNOHANG) == b.pid) {  // ended early
      b.reaped = true;
      b.exit_code = decode_status(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace hftrain_test
