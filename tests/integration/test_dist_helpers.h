// Helpers for the data-parallel / ZeRO integration tests: a tiny gpt run spec, reading the logged
// trajectory, and running the real binary as a child process whose workers can be found and signalled.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_runner.h"

namespace hftrain_test {

// A fresh scratch directory private to this process (test runs in other build directories may run
// the same test at the same time).
inline std::string dist_dir(const std::string& name) { return fresh_dir(name + "_" + std::to_string(::getpid())); }

// gpt on digit_reversal; 240 examples divide evenly over 1, 2 and 3 workers (as the
// single-process batch of 6 does over 6/W per worker). `extra_training` lines join the training section;
// save_strategy is "no" unless they set it (a key given twice is an error).
inline std::string dist_spec(int64_t max_steps, const std::string& extra_training = "") {
  const bool sets_save_strategy = extra_training.find("save_strategy:") != std::string::npos;
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
         "data: {type: digit_reversal, num_digits: 3, train_size: 240, eval_size: 0, test_size: 0}\n"
         "training:\n"
         "  output_dir: out\n"
         "  per_device_train_batch_size: 6\n"
         "  gradient_accumulation_steps: 2\n"
         "  max_steps: " + std::to_string(max_steps) + "\n"
         "  learning_rate: 0.003\n"
         "  weight_decay: 0.01\n"
         "  max_grad_norm: 1.0\n"
         "  logging_steps: 1\n"
         + std::string(sets_save_strategy ? "" : "  save_strategy: \"no\"\n") + extra_training;
}

// A fresh directory where dist_spec(max_steps) with a checkpoint every `save_steps` steps has been trained
// with `train_args` (e.g. "--nproc-per-node 2 --set zero.stage=2"); the run must succeed.
inline std::string trained_dist_dir(const std::string& name, int64_t max_steps, int64_t save_steps,
                                    const std::string& train_args) {
  const std::string dir = dist_dir(name);
  write_text(dir + "/spec.yaml",
             dist_spec(max_steps, "  save_strategy: steps\n  save_steps: " + std::to_string(save_steps) + "\n"));
  CliResult r = run_hftrain("train spec.yaml " + train_args, dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// log_history entries that carry a training loss, in order.
inline std::vector<nlohmann::json> train_logs(const std::string& trainer_state_path) {
  std::vector<nlohmann::json> out;
  const std::string text = read_text(trainer_state_path);
  if (text.empty()) return out;
  const nlohmann::json state = nlohmann::json::parse(text);
  for (const auto& e : state.at("log_history"))
    if (e.contains("loss")) out.push_back(e);
  return out;
}

// The JSON of the "engine memory: {...}" line rank 0 prints after the first step.
inline nlohmann::json engine_memory_report(const std::string& output) {
  const std::string key = "engine memory: ";
  auto at = output.find(key);
  if (at == std::string::npos) return nlohmann::json();
  auto end = output.find('\n', at);
  return nlohmann::json::parse(output.substr(at + key.size(), end - at - key.size()));
}

// A running `hftrain` (the launcher) with its stdout+stderr on a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string output;

  // Reads output until `needle` appears or `seconds` pass; true when it appeared.
  bool read_until(const std::string& needle, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (output.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return output.find(needle) != std::string::npos;
      output.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  // Waits for the exit (reading the rest of the output); -1 when it is still running after `seconds`.
  int wait(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        read_until("\x01never\x01", 0.5);
        ::close(fd);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      read_until("\x01never\x01", 0.05);
    }
  }
};

inline Child spawn_hftrain(const std::vector<std::string>& args, const std::string& cwd,
                           const std::vector<std::string>& env_extra = {}) {
  int p[2];
  if (::pipe(p) != 0) return {};
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    for (const auto& kv : env_extra) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    std::string bin = HFTRAIN_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  c.fd = p[0];
  return c;
}

// Processes whose parent is `parent` (from /proc).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    std::getline(in, line);
    auto close_paren = line.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(line.substr(close_paren + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// The RANK variable of a running process, or -1.
inline int rank_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t pos = 0;
  while (pos < env.size()) {
    std::size_t end = env.find('\0', pos);
    if (end == std::string::npos) end = env.size();
    const std::string kv = env.substr(pos, end - pos);
    if (kv.rfind("RANK=", 0) == 0) return std::stoi(kv.substr(5));
    pos = end + 1;
  }
  return -1;
}

}  // namespace hftrain_test
