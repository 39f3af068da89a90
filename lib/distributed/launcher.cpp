// Worker processes: spawn, forward output and signals, tear down on failure, restart (see launcher.h).
#include "distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "distributed/env.h"
#include "util/error.h"
#include "util/fd_io.h"

extern char** environ;

namespace hftrain {
namespace {

using Clock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  g_signal = sig;
  if (g_signal_pipe[1] >= 0) {
    const char c = 's';
    ssize_t ignored = ::write(g_signal_pipe[1], &c, 1);
    (void)ignored;
  }
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal";
  }
}

struct Worker {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr (read ends)
  std::string partial[2];
  std::deque<std::string> tail;
  // Set by the waiter thread.
  bool exited = false;
  int status = 0;
  Clock::time_point exit_time;
  bool failed() const { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }
};

class Attempt {
 public:
  Attempt(const LaunchOptions& o, int restart) : o_(o), restart_(restart) {}

  // Returns 0 when every worker succeeded, 1 on a failure (failure_ set), 128+sig when stopped by a signal.
  int run() {
    if (::pipe2(notify_, O_CLOEXEC) != 0) throw RuntimeFailure("launcher: cannot create a pipe: " + std::string(std::strerror(errno)));
    spawn_all();
    int code = watch();
    for (auto& t : waiters_) t.join();
    ::close(notify_[0]);
    ::close(notify_[1]);
    return code;
  }

  WorkerFailure failure;

 private:
  std::vector<char*> make_env(const Worker& w, const std::string& addr, int port, std::vector<std::string>& storage) {
    // Replaced below; torchrun's agent-store variables are dropped, since these workers meet in the store
    // their rank 0 hosts (and count restarts in HFTRAIN_RESTART_COUNT).
    static const char* kOurs[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                  "MASTER_PORT", "GROUP_RANK", "HFTRAIN_RESTART_COUNT",
                                  "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"};
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string key = kv.substr(0, kv.find('='));
      bool ours = o_.extra_env.count(key) > 0;
      for (const char* k : kOurs) ours = ours || key == k;
      if (!ours) storage.push_back(kv);
    }
    const int world = o_.nproc_per_node * o_.nnodes;
    storage.push_back("RANK=" + std::to_string(w.rank));
    storage.push_back("LOCAL_RANK=" + std::to_string(w.local_rank));
    storage.push_back("WORLD_SIZE=" + std::to_string(world));
    storage.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o_.nproc_per_node));
    storage.push_back("GROUP_RANK=" + std::to_string(o_.node_rank));
    storage.push_back("MASTER_ADDR=" + addr);
    storage.push_back("MASTER_PORT=" + std::to_string(port));
    storage.push_back("HFTRAIN_RESTART_COUNT=" + std::to_string(restart_));
    for (const auto& [k, v] : o_.extra_env) storage.push_back(k + "=" + v);
    std::vector<char*> env;
    for (auto& s : storage) env.push_back(s.data());
    env.push_back(nullptr);
    return env;
  }

  void spawn_all() {
    const std::string addr = o_.master_addr.empty() ? "127.0.0.1" : o_.master_addr;
    const int port = o_.master_port > 0 ? o_.master_port : free_loopback_port();
    std::vector<std::string> argv_strings = o_.worker_argv(restart_);
    if (argv_strings.empty()) throw RuntimeFailure("launcher: empty worker command line");
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    workers_.resize(static_cast<std::size_t>(o_.nproc_per_node));
    for (int local = 0; local < o_.nproc_per_node; ++local) {
      Worker& w = workers_[static_cast<std::size_t>(local)];
      w.local_rank = local;
      w.rank = o_.node_rank * o_.nproc_per_node + local;
      std::vector<std::string> env_storage;
      std::vector<char*> envp = make_env(w, addr, port, env_storage);
      int out[2], err[2];
      if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
        throw RuntimeFailure("launcher: cannot create pipes: " + std::string(std::strerror(errno)));
      pid_t pid = ::fork();
      if (pid < 0) throw RuntimeFailure("launcher: fork failed: " + std::string(std::strerror(errno)));
      if (pid == 0) {
        // Child: only async-signal-safe calls until exec.
        ::setpgid(0, 0);  // terminal Ctrl-C reaches the launcher only, which forwards it once
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        ::execve(argv[0], argv.data(), envp.data());
        const char msg[] = "launcher: exec of the worker binary failed\n";
        ssize_t ignored = ::write(2, msg, sizeof msg - 1);
        (void)ignored;
        ::_exit(127);
      }
      ::close(out[1]);
      ::close(err[1]);
      w.pid = pid;
      w.fds[0] = out[0];
      w.fds[1] = err[0];
    }
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      waiters_.emplace_back([this, i] {
        int status = 0;
        pid_t pid = workers_[i].pid;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        std::lock_guard<std::mutex> lock(mu_);
        workers_[i].exited = true;
        workers_[i].status = status;
        workers_[i].exit_time = Clock::now();
        const char c = 'x';
        ssize_t ignored = ::write(notify_[1], &c, 1);
        (void)ignored;
      });
    }
  }

  void forward(Worker& w, int stream, const std::string& data, bool flush_partial) {
    std::string& buf = w.partial[stream];
    buf += data;
    std::string out;
    std::size_t start = 0;
    const std::string prefix = w.rank == 0 ? "" : "[rank " + std::to_string(w.rank) + "] ";
    for (;;) {
      std::size_t nl = buf.find('\n', start);
      if (nl == std::string::npos) break;
      std::string line = buf.substr(start, nl - start);
      // The logger already prefixes other ranks' lines the same way: do not double it.
      out += (line.rfind(prefix, 0) == 0 ? "" : prefix) + line + "\n";
      w.tail.push_back(line);
      if (static_cast<int>(w.tail.size()) > o_.tail_lines) w.tail.pop_front();
      start = nl + 1;
    }
    buf.erase(0, start);
    if (flush_partial && !buf.empty()) {
      out += prefix + buf + "\n";
      w.tail.push_back(buf);
      if (static_cast<int>(w.tail.size()) > o_.tail_lines) w.tail.pop_front();
      buf.clear();
    }
    if (!out.empty()) write_all(stream == 0 ? 1 : 2, out);  // an error here has nowhere to be reported
  }

  void signal_alive(int sig) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : workers_)
      if (!w.exited) ::kill(w.pid, sig);
  }

  // What watch() has decided so far.
  struct WatchState {
    bool tearing_down = false, stopping = false, killed = false;
    int stop_signal = 0;
    Clock::time_point teardown_start, kill_deadline, drain_deadline;
  };

  // Waits up to 50 ms for output, an exit or a signal, and forwards what the workers wrote.
  void poll_once() {
    std::vector<pollfd> pfds;
    std::vector<std::pair<std::size_t, int>> owners;
    pfds.push_back({notify_[0], POLLIN, 0});
    pfds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (std::size_t i = 0; i < workers_.size(); ++i)
      for (int s = 0; s < 2; ++s)
        if (workers_[i].fds[s] >= 0) {
          pfds.push_back({workers_[i].fds[s], POLLIN, 0});
          owners.emplace_back(i, s);
        }
    ::poll(pfds.data(), pfds.size(), 50);
    char sink[256];
    if (pfds[0].revents & POLLIN) {
      ssize_t ignored = ::read(notify_[0], sink, sizeof sink);
      (void)ignored;
    }
    if (pfds[1].revents & POLLIN) {
      ssize_t ignored = ::read(g_signal_pipe[0], sink, sizeof sink);
      (void)ignored;
    }
    for (std::size_t k = 2; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [i, s] = owners[k - 2];
      read_output(workers_[i], s);
    }
  }

  // Forwards what worker `w` wrote on `stream`; at its end the pipe is closed.
  void read_output(Worker& w, int stream) {
    char buf[65536];
    ssize_t n = ::read(w.fds[stream], buf, sizeof buf);
    if (n > 0) {
      forward(w, stream, std::string(buf, static_cast<std::size_t>(n)), false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      forward(w, stream, "", true);
      ::close(w.fds[stream]);
      w.fds[stream] = -1;
    }
  }

  // A signal to the launcher is forwarded to the workers once; they get 30 s before SIGKILL.
  void forward_stop_signal(WatchState& st, Clock::time_point now) {
    if (g_signal == 0 || st.stopping) return;
    st.stopping = true;
    st.stop_signal = g_signal;
    std::fprintf(stderr, "launcher: received %s; forwarding it to the workers\n", signal_name(st.stop_signal));
    signal_alive(st.stop_signal);
    st.kill_deadline = now + std::chrono::seconds(30);
  }

  // Whether every worker has exited; `any_failed` whether one of them failed.
  bool all_exited(bool& any_failed) {
    std::lock_guard<std::mutex> lock(mu_);
    bool all = true;
    for (auto& w : workers_) {
      all = all && w.exited;
      any_failed = any_failed || (w.exited && w.failed());
    }
    return all;
  }

  // The first failure tears the others down: SIGTERM, then SIGKILL after stop_grace_seconds.
  void tear_down(WatchState& st, Clock::time_point now) {
    st.tearing_down = true;
    st.teardown_start = now;
    signal_alive(SIGTERM);
    st.kill_deadline = now + std::chrono::milliseconds(static_cast<int64_t>(o_.stop_grace_seconds * 1000));
  }

  // Once every worker exited: done when their pipes are drained, or 2 s later.
  bool drained(WatchState& st, Clock::time_point now) {
    bool pipes_open = false;
    for (auto& w : workers_) pipes_open = pipes_open || w.fds[0] >= 0 || w.fds[1] >= 0;
    if (st.drain_deadline == Clock::time_point()) st.drain_deadline = now + std::chrono::seconds(2);
    return !pipes_open || now >= st.drain_deadline;
  }

  void close_outputs() {
    for (auto& w : workers_)
      for (int s = 0; s < 2; ++s)
        if (w.fds[s] >= 0) {
          forward(w, s, "", true);
          ::close(w.fds[s]);
          w.fds[s] = -1;
        }
  }

  // The first failure by exit time caused the teardown; later ones are its consequences.
  void record_first_failure(Clock::time_point teardown_start) {
    const Worker* first = nullptr;
    for (const auto& w : workers_)
      if (w.failed() && w.exit_time <= teardown_start && (!first || w.exit_time < first->exit_time)) first = &w;
    if (!first)
      for (const auto& w : workers_)
        if (w.failed() && (!first || w.exit_time < first->exit_time)) first = &w;
    failure.rank = first->rank;
    failure.pid = first->pid;
    if (WIFSIGNALED(first->status)) failure.signal = WTERMSIG(first->status);
    else failure.exit_code = WEXITSTATUS(first->status);
    failure.tail.assign(first->tail.begin(), first->tail.end());
  }

  int watch() {
    WatchState st;
    for (;;) {
      poll_once();
      const auto now = Clock::now();
      forward_stop_signal(st, now);
      bool any_failed = false;
      const bool exited = all_exited(any_failed);
      if (any_failed && !st.tearing_down && !st.stopping) tear_down(st, now);
      if ((st.tearing_down || st.stopping) && !st.killed && now >= st.kill_deadline) {
        st.killed = true;
        signal_alive(SIGKILL);
      }
      if (exited && drained(st, now)) break;
    }
    close_outputs();
    if (st.stopping) return 128 + st.stop_signal;
    if (!st.tearing_down) return 0;
    record_first_failure(st.teardown_start);
    return 1;
  }

  const LaunchOptions& o_;
  int restart_;
  std::vector<Worker> workers_;
  std::vector<std::thread> waiters_;
  std::mutex mu_;
  int notify_[2] = {-1, -1};
};

class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw RuntimeFailure("launcher: cannot create a pipe: " + std::string(std::strerror(errno)));
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace

std::string WorkerFailure::describe() const {
  std::string s = "worker rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") ";
  if (signal != 0) s += "was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  else s += "exited with code " + std::to_string(exit_code);
  return s;
}

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RuntimeFailure("launcher: cannot open a socket to find a free port: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    throw RuntimeFailure("launcher: cannot find a free loopback port: " + why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeFailure("launcher: cannot find the running executable: " + ec.message());
  return p.string();
}

namespace {

LaunchResult run_attempts(const LaunchOptions& options) {
  SignalScope signals;
  LaunchResult result;
  for (int attempt = 0;; ++attempt) {
    Attempt a(options, attempt);
    const int code = a.run();
    result.restarts = attempt;
    if (code != 1) {
      result.exit_code = code;
      return result;
    }
    result.failures.push_back(a.failure);
    std::string msg = a.failure.describe();
    msg += (options.nproc_per_node > 1 ? "; stopped the other workers" : "");
    if (!a.failure.tail.empty()) {
      msg += ". Its last output:";
      for (const auto& line : a.failure.tail) msg += "\n  | " + line;
    } else {
      msg += " (it printed nothing)";
    }
    result.message = msg;
    // A worker that stopped on a configuration error (exit 2) would stop the same way again.
    const bool config_error = a.failure.signal == 0 && a.failure.exit_code == 2;
    if (attempt >= options.max_restarts || config_error) {
      result.exit_code = config_error ? 2 : 1;
      return result;
    }
    std::fprintf(stderr, "launcher: %s\nlauncher: restarting the job (restart %d of %d)\n", msg.c_str(), attempt + 1,
                 options.max_restarts);
  }
}

}  // namespace

LaunchResult launch_workers(const LaunchOptions& options) {
  if (options.nproc_per_node < 1) throw ConfigError("--nproc-per-node must be at least 1");
  if (options.nnodes < 1) throw ConfigError("--nnodes must be at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes)
    throw ConfigError("--node-rank " + std::to_string(options.node_rank) + " must be in [0, " +
                      std::to_string(options.nnodes - 1) + "]");
  if (options.nnodes > 1 && (options.master_addr.empty() || options.master_port <= 0))
    throw ConfigError("--nnodes > 1 needs --master-addr and --master-port (the address of node 0, reachable from every node)");
  if (!options.worker_argv) throw RuntimeFailure("launcher: no worker command line");
  // A single-node job gets a job token of its own, so only its workers can join its rendezvous; several
  // nodes share the one their user exported (HFTRAIN_RDZV_TOKEN).
  LaunchOptions with_token = options;
  if (options.nnodes == 1 && job_token_from_env().empty() && !options.extra_env.count(kJobTokenVariable))
    with_token.extra_env[kJobTokenVariable] = new_job_token();
  return run_attempts(with_token);
}

}  // namespace hftrain
