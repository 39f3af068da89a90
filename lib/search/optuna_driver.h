// The Optuna driver: one long-lived Python process (HFTRAIN_SEARCH_PYTHON, default /usr/bin/python3, the
// interpreter Debian's python3-optuna installs into) running kOptunaDriverScript, asked one JSON request per
// line over pipes. It holds the study and the trials this process asked for. The child ignores SIGINT and
// has its own process group: Ctrl-C reaches hftrain search only, which then tells the study what happened.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace hftrain {

extern const char* const kOptunaDriverScript;

inline constexpr const char* kSearchPythonVariable = "HFTRAIN_SEARCH_PYTHON";

// The interpreter that runs the driver: $HFTRAIN_SEARCH_PYTHON, else /usr/bin/python3.
std::string search_python();

class OptunaDriver {
 public:
  OptunaDriver();  // starts the interpreter (RuntimeFailure when it cannot be started)
  ~OptunaDriver();  // closes its stdin (it exits) and reaps it
  OptunaDriver(const OptunaDriver&) = delete;
  OptunaDriver& operator=(const OptunaDriver&) = delete;

  // Sends {"op": op, ...request} and returns the answer's "result". A problem the user caused (storage URL,
  // missing optuna, a study of the other direction) is a ConfigError, any other a RuntimeFailure, each
  // naming `op`.
  nlohmann::json call(const std::string& op, nlohmann::json request = nlohmann::json::object());

 private:
  std::string read_line();
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

}  // namespace hftrain
