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

#include <catch2/catch.hpp>
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

// A JSON file, required to exist and hold something.
inline nlohmann::json read_json(const std::string& path) {
  const std::string text = read_text(path);
  INFO(path);
  REQUIRE_FALSE(text.empty());
  return nlohmann::json::parse(text);
}

// A JSON-lines file (predictions.jsonl, generated_predictions.jsonl), one value per line.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// JSON lines of `n` texts of 3 to 40 words (the bytes tokenizer: 15 to 250 tokens), so padded batches carry
// much padding and rows of odd lengths.
inline std::string variable_rows(int n) {
  const char* words[] = {"the", "king", "shall", "not", "speak", "of", "this", "night", "my", "lord"};
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string text;
    for (int w = 0; w < 3 + (i * 17) % 38; ++w) text += std::string(words[(i + w * 3) % 10]) + " ";
    out += "{\"text\": \"" + text + "\"}\n";
  }
  return out;
}

// Runs hftrain and requires exit code 0 (the command and its output shown otherwise); returns the output.
inline std::string run_ok(const std::string& command, const std::string& dir) {
  CliResult r = run_hftrain(command, dir);
  INFO(command);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

// eval_loss of an HF metrics file (eval_results.json, all_results.json).
inline double eval_loss(const std::string& path) {
  return nlohmann::json::parse(read_text(path)).at("eval_loss").get<double>();
}

}  // namespace hftrain_test
