// The launcher behind `hftrain train --nproc-per-node N`: spawns N copies of the same binary as
// workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT in their
// environment, as torchrun sets them), forwards their output (rank 0 as is, others prefixed
// "[rank r] ") and SIGINT/SIGTERM, and watches them. When a worker fails, the others get SIGTERM,
// then SIGKILL after a grace period, so the job ends within 10 s; the launcher then reports the worker
// that failed first (by exit time): its rank, exit code or signal and its last output lines. With
// max_restarts > 0 the whole job is started again (the argv callback decides how it resumes).
// No LibTorch here.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hftrain {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // "" = 127.0.0.1 (single node)
  int master_port = 0;      // 0 = a free loopback port, chosen per attempt (single node only)
  int max_restarts = 0;
  double stop_grace_seconds = 5;  // SIGTERM -> SIGKILL delay when tearing the job down
  int tail_lines = 20;            // last output lines kept per worker for the failure report
  // The workers' argv for attempt `restart` (0 = the first run); argv[0] is the executable.
  std::function<std::vector<std::string>(int restart)> worker_argv;
  std::map<std::string, std::string> extra_env;
};

struct WorkerFailure {
  int rank = -1;
  int pid = 0;
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal killed it
  std::vector<std::string> tail;
  std::string describe() const;  // "worker rank 1 (pid 123) was killed by signal 9 (SIGKILL)"
};

struct LaunchResult {
  // 0 all workers succeeded; 1 a worker failed; 2 the first failure was a configuration error (exit 2,
  // never restarted); 128+sig when stopped by SIGINT/SIGTERM
  int exit_code = 0;
  int restarts = 0;
  std::vector<WorkerFailure> failures;  // the first failure of each attempt that failed
  std::string message;                  // the report printed for the last failure ("" on success)
};

// Runs the job to completion. Throws ConfigError for impossible options (e.g. several nodes and no
// master address).
LaunchResult launch_workers(const LaunchOptions& options);

// A TCP port that was free on 127.0.0.1 a moment ago.
int free_loopback_port();

// Path of the running executable (/proc/self/exe resolved).
std::string self_executable();

}  // namespace hftrain
