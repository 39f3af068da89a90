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

// The child's argv and environment (HFTRAIN_TRIAL_REPORT_FD set), prepared before fork: no allocation
// happens between fork and exec.
struct ChildCommand {
  std::vector<char*> args;
  std::vector<std::string> env_text;
  std::vector<char*> envp;
};

void prepare_command(ChildCommand& c, const std::vector<std::string>& argv) {
  for (const auto& a : argv) c.args.push_back(const_cast<char*>(a.c_str()));
  c.args.push_back(nullptr);
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kTrialReportFdVariable, std::strlen(kTrialReportFdVariable)) != 0) c.env_text.emplace_back(*e);
  c.env_text.push_back(std::string(kTrialReportFdVariable) + "=" + std::to_string(kReportFd));
  for (auto& e : c.env_text) c.envp.push_back(e.data());
  c.envp.push_back(nullptr);
}

// In the child: its own process group, output to the log, the report pipe's write end at kReportFd, then exec.
[[noreturn]] void exec_trial(const ChildCommand& c, pid_t parent, int log_fd, int report_write_fd) {
  ::setpgid(0, 0);                     // its own group: the search stops it (and its workers) as one
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // and it stops when the search dies
  if (::getppid() != parent) ::_exit(143);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  ::dup2(null_fd, 0);
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);
  if (report_write_fd == kReportFd)
    ::fcntl(kReportFd, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
  else
    ::dup2(report_write_fd, kReportFd);
  ::execve(c.args[0], c.args.data(), c.envp.data());
  const std::string msg = std::string("error: cannot run ") + c.args[0] + ": " + std::strerror(errno) + "\n";
  (void)!::write(2, msg.data(), msg.size());
  ::_exit(1);
}

// Reads a running trial's reports until it exits, stopping it when asked (a pruning verdict or a stop signal).
class TrialWatch {
 public:
  TrialWatch(pid_t pid, int report_fd, const std::function<bool(const nlohmann::json&)>& on_evaluation)
      : pid_(pid), report_fd_(report_fd), on_evaluation_(on_evaluation) {}

  TrialEnd run() {
    read_reports();
    ::close(report_fd_);
    while (!exited_) {
      if (::waitpid(pid_, &status_, 0) == pid_) exited_ = true;
      else if (errno != EINTR) break;
    }
    end_.exit_code = exit_status(status_);
    if (end_.stop_signal == 0 && !end_.pruned && pending_stop_signal() != 0) end_.stop_signal = pending_stop_signal();
    return end_;
  }

 private:
  void read_reports() {
    bool eof = false;
    while (!eof) {
      pollfd p{report_fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, exited_ ? 0 : 200);
      if (ready > 0) {
        char chunk[65536];
        const ssize_t n = ::read(report_fd_, chunk, sizeof chunk);
        if (n > 0) buffer_.append(chunk, static_cast<std::size_t>(n));
        eof = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
        take_lines();
      } else if (exited_) {
        break;  // exited, and nothing more to read now (a leftover worker may still hold the pipe)
      }
      if (!stopping_ && pending_stop_signal() != 0) {
        end_.stop_signal = pending_stop_signal();
        stop();
      }
      if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    }
  }

  void take_lines() {
    std::size_t nl;
    while ((nl = buffer_.find('\n')) != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      nlohmann::json evaluation;
      try {
        evaluation = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        continue;  // not a report (the trial writes only whole JSON lines)
      }
      end_.evaluations.push_back(evaluation);
      if (!stopping_ && on_evaluation_(evaluation)) {
        end_.pruned = true;
        end_.pruning_evaluation = evaluation;
        stop();
      }
    }
  }

  void stop() {
    stopping_ = true;
    ::kill(-pid_, SIGTERM);
  }

  const pid_t pid_;
  const int report_fd_;
  const std::function<bool(const nlohmann::json&)>& on_evaluation_;
  TrialEnd end_;
  std::string buffer_;
  bool stopping_ = false, exited_ = false;
  int status_ = 0;
};

}  // namespace

TrialEnd run_trial_process(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::function<bool(const nlohmann::json&)>& on_evaluation) {
  ChildCommand command;
  prepare_command(command, argv);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw RuntimeFailure("search: cannot open the trial log " + log_path + ": " + std::strerror(errno));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw RuntimeFailure(std::string("search: pipe failed: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeFailure(std::string("search: fork failed: ") + std::strerror(errno));
  if (pid == 0) exec_trial(command, parent, log_fd, report[1]);
  ::setpgid(pid, pid);  // also here, so that a stop sent at once reaches the group
  ::close(log_fd);
  ::close(report[1]);
  return TrialWatch(pid, report[0], on_evaluation).run();
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
