// Starting and talking to the Optuna driver process (see optuna_driver.h).
#include "search/optuna_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/fd_io.h"

namespace hftrain {

std::string search_python() {
  const char* v = std::getenv(kSearchPythonVariable);
  return v && *v ? v : "/usr/bin/python3";
}

OptunaDriver::OptunaDriver() {
  const std::string python = search_python();
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
    throw RuntimeFailure(std::string("optuna driver: pipe failed: ") + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) throw RuntimeFailure(std::string("optuna driver: fork failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);  // not in the terminal's foreground group: Ctrl-C goes to hftrain search only
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> argv = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"),
                               const_cast<char*>(kOptunaDriverScript), nullptr};
    ::execv(python.c_str(), argv.data());
    const std::string msg = "{\"ok\": false, \"config\": true, \"error\": \"cannot run " + python + " (" + kSearchPythonVariable +
                            "): " + std::strerror(errno) + "\"}\n";
    (void)!::write(1, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
}

OptunaDriver::~OptunaDriver() {
  if (to_child_ >= 0) ::close(to_child_);  // end of input: the loop ends and the interpreter exits
  if (from_child_ >= 0) ::close(from_child_);
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string OptunaDriver::read_line() {
  for (;;) {
    const std::size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    char chunk[65536];
    const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

nlohmann::json OptunaDriver::call(const std::string& op, nlohmann::json request) {
  request["op"] = op;
  // Not sent: the driver has gone (its answer, e.g. why it could not start, may still be readable).
  const bool sent = write_all(to_child_, request.dump() + "\n");
  const std::string line = read_line();
  if (!sent && line.empty())
    throw RuntimeFailure("optuna driver (" + search_python() + "): cannot send '" + op + "': " + std::strerror(errno));
  if (line.empty())
    throw RuntimeFailure("optuna driver (" + search_python() + ") ended without answering '" + op +
                         "' (its error output is above)");
  nlohmann::json answer;
  try {
    answer = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    throw RuntimeFailure("optuna driver: answer to '" + op + "' is not JSON: " + line);
  }
  if (answer.value("ok", false)) return answer["result"];
  const std::string what = "optuna (" + op + "): " + answer.value("error", std::string("unknown error"));
  if (answer.value("config", false)) throw ConfigError(what);
  throw RuntimeFailure(what);
}

}  // namespace hftrain
