// The launcher with /bin/sh as the worker: the torchrun-style environment each worker gets, teardown
// of the whole job when one worker is killed or fails (naming its rank, signal or exit code and its last
// output, within 10 s), restarts, and SIGTERM forwarding.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "distributed/launcher.h"
#include "scratch_files.h"

using hftrain_test::scratch;

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LaunchOptions shell_job(int n, const std::string& script) {
  LaunchOptions o;
  o.nproc_per_node = n;
  o.stop_grace_seconds = 2;
  o.worker_argv = [script](int) { return std::vector<std::string>{"/bin/sh", "-c", script}; };
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("launcher gives every worker the torchrun environment", "[unit][dist]") {
  const std::string dir = scratch("env");
  LaunchOptions o = shell_job(3, "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
                                 "$HFTRAIN_RESTART_COUNT\" > " + dir + "/env_$RANK");
  LaunchResult r = launch_workers(o);
  REQUIRE(r.exit_code == 0);
  std::string port;
  for (int rank = 0; rank < 3; ++rank) {
    std::istringstream in(slurp(dir + "/env_" + std::to_string(rank)));
    std::string rk, lr, ws, lws, addr, p, restart;
    in >> rk >> lr >> ws >> lws >> addr >> p >> restart;
    CHECK(rk == std::to_string(rank));
    CHECK(lr == std::to_string(rank));
    CHECK(ws == "3");
    CHECK(lws == "3");
    CHECK(addr == "127.0.0.1");
    CHECK(std::stoi(p) > 0);
    CHECK(restart == "0");
    if (rank == 0) port = p;
    CHECK(p == port);  // one rendezvous port for the job
  }
  fs::remove_all(dir);
}

TEST_CASE("launcher's workers meet in their own store even when started inside torchrun's agent-store environment",
          "[unit][dist]") {
  const std::string dir = scratch("agent_env");
  LaunchOptions o = shell_job(2, "echo \"${TORCHELASTIC_USE_AGENT_STORE-unset} ${TORCHELASTIC_RESTART_COUNT-unset} "
                                 "$HFTRAIN_RESTART_COUNT\" > " + dir + "/env_$RANK");
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "4", 1);
  LaunchResult r = launch_workers(o);
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
  REQUIRE(r.exit_code == 0);
  CHECK(slurp(dir + "/env_0") == "unset unset 0\n");
  CHECK(slurp(dir + "/env_1") == "unset unset 0\n");
  fs::remove_all(dir);
}

TEST_CASE("launcher: a worker killed by SIGKILL ends the job, naming rank and signal", "[unit][dist]") {
  LaunchOptions o = shell_job(3,
                              "if [ \"$RANK\" = 1 ]; then echo 'rank one is about to die'; sleep 0.3; kill -9 $$; fi; "
                              "exec sleep 60");
  const auto start = std::chrono::steady_clock::now();
  LaunchResult r = launch_workers(o);
  const double took = seconds_since(start);
  CHECK(took < 50.0);  // the kill ended the job, not the other workers' `sleep 60`
  CHECK(r.exit_code == 1);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].rank == 1);
  CHECK(r.failures[0].signal == SIGKILL);
  INFO(r.message);
  CHECK(r.message.find("worker rank 1") != std::string::npos);
  CHECK(r.message.find("SIGKILL") != std::string::npos);
  CHECK(r.message.find("rank one is about to die") != std::string::npos);
}

TEST_CASE("launcher: a worker that fails is reported with its exit code, not the peers it took down", "[unit][dist]") {
  // Rank 2 fails first; the others then fail too (as peers of a dead rank do), but later.
  LaunchOptions o = shell_job(3,
                              "if [ \"$RANK\" = 2 ]; then echo 'error: something broke' >&2; exit 3; fi; "
                              "sleep 0.5; echo 'peer lost' >&2; exit 1");
  LaunchResult r = launch_workers(o);
  CHECK(r.exit_code == 1);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].rank == 2);
  CHECK(r.failures[0].exit_code == 3);
  CHECK(r.message.find("exited with code 3") != std::string::npos);
  CHECK(r.message.find("something broke") != std::string::npos);
}

TEST_CASE("launcher restarts the job up to max_restarts", "[unit][dist]") {
  const std::string dir = scratch("restart");
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.max_restarts = 2;
  o.stop_grace_seconds = 2;
  o.worker_argv = [dir](int restart) {
    // The first attempt fails on rank 0; the second succeeds and records the restart count it saw.
    std::string script = restart == 0 ? "if [ \"$RANK\" = 0 ]; then exit 7; fi; exec sleep 60"
                                      : "echo $HFTRAIN_RESTART_COUNT > " + dir + "/seen_$RANK";
    return std::vector<std::string>{"/bin/sh", "-c", script};
  };
  LaunchResult r = launch_workers(o);
  CHECK(r.exit_code == 0);
  CHECK(r.restarts == 1);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].exit_code == 7);
  CHECK(slurp(dir + "/seen_1") == "1\n");
  fs::remove_all(dir);
}

TEST_CASE("launcher forwards SIGTERM to the workers and exits 128+15", "[unit][dist]") {
  const std::string dir = scratch("sigterm");
  LaunchOptions o = shell_job(2, "trap 'echo stopped > " + dir + "/term_$RANK; exit 0' TERM; echo ready > " + dir +
                                     "/ready_$RANK; while true; do sleep 0.05; done");
  std::thread sender([dir] {
    for (int i = 0; i < 200 && !(fs::exists(dir + "/ready_0") && fs::exists(dir + "/ready_1")); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ::kill(::getpid(), SIGTERM);
  });
  LaunchResult r = launch_workers(o);
  sender.join();
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(slurp(dir + "/term_0") == "stopped\n");
  CHECK(slurp(dir + "/term_1") == "stopped\n");
  fs::remove_all(dir);
}

TEST_CASE("launcher refuses impossible layouts", "[unit][dist]") {
  LaunchOptions o = shell_job(2, "true");
  o.nnodes = 2;
  CHECK_THROWS_WITH(launch_workers(o), Catch::Contains("--master-addr"));
  o.nnodes = 1;
  o.node_rank = 1;
  CHECK_THROWS_WITH(launch_workers(o), Catch::Contains("--node-rank"));
}

TEST_CASE("launcher: a configuration error (exit 2) is not restarted and ends the job with exit 2", "[unit][dist]") {
  LaunchOptions o = shell_job(2, "if [ \"$RANK\" = 1 ]; then echo 'error: spec differs' >&2; exit 2; fi; exec sleep 60");
  o.max_restarts = 3;
  LaunchResult r = launch_workers(o);
  CHECK(r.exit_code == 2);
  CHECK(r.restarts == 0);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].rank == 1);
  CHECK(r.message.find("spec differs") != std::string::npos);
}

TEST_CASE("launcher gives the workers of a single-node job a fresh job token, and keeps an exported one",
          "[unit][dist]") {
  const std::string dir = scratch("token");
  LaunchOptions o = shell_job(2, "echo \"$HFTRAIN_RDZV_TOKEN\" > " + dir + "/token_$RANK");
  ::unsetenv("HFTRAIN_RDZV_TOKEN");
  REQUIRE(launch_workers(o).exit_code == 0);
  const std::string t0 = slurp(dir + "/token_0"), t1 = slurp(dir + "/token_1");
  CHECK(t0.size() == 33);  // 32 hex digits and the newline
  CHECK(t0 == t1);
  REQUIRE(launch_workers(o).exit_code == 0);
  CHECK(slurp(dir + "/token_0") != t0);  // per launch
  ::setenv("HFTRAIN_RDZV_TOKEN", "shared-secret", 1);
  REQUIRE(launch_workers(o).exit_code == 0);
  ::unsetenv("HFTRAIN_RDZV_TOKEN");
  CHECK(slurp(dir + "/token_1") == "shared-secret\n");
  fs::remove_all(dir);
}
