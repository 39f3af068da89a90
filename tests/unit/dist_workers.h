// Helpers for unit tests that run real worker processes on loopback: the test case launches copies of
// the test binary (through the launcher), each running one hidden worker case by name; a worker fails
// its case (exit code != 0) when a check fails.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "distributed/env.h"
#include "distributed/launcher.h"

namespace hftrain_test {

// Runs the hidden case `test_name` in `n` workers with `env` added; their exit code (0 = all passed).
inline int run_workers(const std::string& test_name, int n, std::map<std::string, std::string> env = {}) {
  hftrain::LaunchOptions o;
  o.nproc_per_node = n;
  o.stop_grace_seconds = 2;
  o.extra_env = std::move(env);
  // -w NoTests: a worker whose case name matches nothing fails instead of passing with no checks run
  o.worker_argv = [test_name](int) {
    return std::vector<std::string>{hftrain::self_executable(), test_name, "-w", "NoTests"};
  };
  hftrain::LaunchResult r = hftrain::launch_workers(o);
  if (r.exit_code != 0) WARN(r.message);
  return r.exit_code;
}

// Inside a worker: the Gloo communicator of the launched group.
inline std::unique_ptr<hftrain::Comm> worker_comm(int timeout_ms = 20000) {
  hftrain::DistEnv env = hftrain::detect_dist_env();
  REQUIRE(env.is_worker());
  return hftrain::make_gloo_comm(env, std::chrono::milliseconds(timeout_ms));
}

}  // namespace hftrain_test
