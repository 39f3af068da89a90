// Typed, user-facing errors. Each carries a message written for the person running hftrain and
// maps to a process exit code in app/ (ConfigError/UsageError -> 2, RuntimeFailure -> 1,
// StoppedBySignal -> 130 / 143).
#pragma once

#include <stdexcept>
#include <string>

namespace hftrain {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int exit_code) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// The run spec or a command-line argument is wrong. Nothing has been written.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(message, 2) {}
};

// The command line itself is malformed.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, 2) {}
};

// Something failed while running: a file could not be read or written, a tensor is malformed.
class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(const std::string& message) : Error(message, 1) {}
};

// Training stopped on SIGINT / SIGTERM after saving a checkpoint: exit 128 + signal (130 / 143).
// `checkpoint_dir` is the checkpoint that resumes the run.
class StoppedBySignal : public Error {
 public:
  StoppedBySignal(const std::string& message, int signal, std::string checkpoint_dir)
      : Error(message, 128 + signal), signal_(signal), checkpoint_dir_(std::move(checkpoint_dir)) {}
  int signal() const { return signal_; }
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }

 private:
  int signal_;
  std::string checkpoint_dir_;
};

}  // namespace hftrain
