// Running a search trial as a child process and reading its evaluation reports (see trial_process.h).
#include "search/trial_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "train/trial_report.h"
#include "util/error.h"
#include "util/signals.h"

extern char** environ;

namespace hftrain {
namespace {

constexpr int kReportFd = 3;  // the descriptor the trial writes its reports to

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

TrialEnd run_trial_process(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::function<bool(const nlohmann::json&)>& on_evaluation) {
  // Everything the child needs is prepared before fork (no allocation between fork and exec).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kTrialReportFdVariable, std::strlen(kTrialReportFdVariable)) != 0) env_text.emplace_back(*e);
  env_text.push_back(std::string(kTrialReportFdVariable) + "=" + std::to_string(kReportFd));
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw RuntimeFailure("search: cannot open the trial log " + log_path + ": " + std::strerror(errno));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw RuntimeFailure(std::string("search: pipe failed: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeFailure(std::string("search: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);                     // its own group: the search stops it (and its workers) as one
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // and it stops when the search dies
    if (::getppid() != parent) ::_exit(143);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    if (report[1] == kReportFd)
      ::fcntl(kReportFd, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
    else
      ::dup2(report[1], kReportFd);
    ::execve(args[0], args.data(), envp.data());
    const std::string msg = std::string("error: cannot run ") + args[0] + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(1);
  }
  ::setpgid(pid, pid);  // also here, so that a stop sent at once reaches the group
  ::close(log_fd);
  ::close(report[1]);
  TrialEnd end;
  std::string buffer;
  bool stopping = false, exited = false, eof = false;
  int status = 0;
  auto stop = [&] {
    stopping = true;
    ::kill(-pid, SIGTERM);
  };
  auto take_lines = [&] {
    std::size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      nlohmann::json evaluation;
      try {
        evaluation = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        continue;  // not a report (the trial writes only whole JSON lines)
      }
      end.evaluations.push_back(evaluation);
      if (!stopping && on_evaluation(evaluation)) {
        end.pruned = true;
        end.pruning_evaluation = evaluation;
        stop();
      }
    }
  };
  while (!eof) {
    pollfd p{report[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, exited ? 0 : 200);
    if (ready > 0) {
      char chunk[65536];
      const ssize_t n = ::read(report[0], chunk, sizeof chunk);
      if (n > 0) buffer.append(chunk, static_cast<std::size_t>(n));
      eof = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
      take_lines();
    } else if (exited) {
      break;  // exited, and nothing more to read now (a leftover worker may still hold the pipe)
    }
    if (!stopping && pending_stop_signal() != 0) {
      end.stop_signal = pending_stop_signal();
      stop();
    }
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
  }
  ::close(report[0]);
  while (!exited) {
    if (::waitpid(pid, &status, 0) == pid) exited = true;
    else if (errno != EINTR) break;
  }
  end.exit_code = exit_status(status);
  if (end.stop_signal == 0 && !end.pruned && pending_stop_signal() != 0) end.stop_signal = pending_stop_signal();
  return end;
}

std::string trial_failure_text(const std::string& log_path, std::size_t tail_lines) {
  std::ifstream in(log_path);
  std::vector<std::string> lines;
  std::size_t from = std::string::npos;  // the last "error: " line: the error and what follows it
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("error: ", 0) == 0) from = lines.size();
    lines.push_back(line);
  }
  if (from == std::string::npos) from = lines.size() > tail_lines ? lines.size() - tail_lines : 0;
  std::string text;
  for (std::size_t i = from; i < lines.size() && i < from + 20; ++i) text += (text.empty() ? "" : "\n") + lines[i];
  return text;
}

}  // namespace hftrain
