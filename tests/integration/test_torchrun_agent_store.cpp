// hftrain workers under torchrun's elastic agent, which hosts a torch TCPStore at MASTER_ADDR:MASTER_PORT
// itself and starts its workers with TORCHELASTIC_USE_AGENT_STORE=True: every rank joins that store as a
// client (no rank listens on the port) and the job trains as one process with the same global batch.
// First hftrain's TCPStore client against torch's own store and client, then the agent's part played by
// the test (a real TCPStore from python3-torch on the port, the agent's environment for two workers),
// then torchrun itself. All need python3-torch; without it they are reported skipped.
#include <signal.h>

#include <cmath>
#include <filesystem>

#include "distributed/launcher.h"
#include "distributed/torch_store.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;

namespace {

const char* kPython = "/usr/bin/python3";

bool torch_distributed_available() {
  return run_shell(std::string(kPython) + " -c 'import torch.distributed.run' 2>&1").exit_code == 0;
}

// What torchrun's agent does before it starts workers: a TCPStore server on the port. It then prints
// what the workers wrote under torch's worker scope for attempt 0 (PrefixStore "/worker/attempt_0"),
// which is where torch's own env:// rendezvous puts a worker's keys.
const char* kAgentStore =
    "import sys, time\n"
    "from datetime import timedelta\n"
    "import torch.distributed as d\n"
    "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=True, wait_for_workers=False,\n"
    "               timeout=timedelta(seconds=240))\n"
    "print('agent store ready', flush=True)\n"
    "v = d.PrefixStore('/worker/attempt_0', s).get('hftrain/rdzv/verdict')\n"
    "print('agent store saw the verdict ' + v.decode(), flush=True)\n"
    "time.sleep(240)\n";

// A TCPStore whose own torch client, in the worker scope of attempt 1, leaves keys for hftrain's
// client and reads the one it leaves back.
const char* kTorchPeer =
    "import sys\n"
    "from datetime import timedelta\n"
    "import torch.distributed as d\n"
    "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=True, wait_for_workers=False,\n"
    "               timeout=timedelta(seconds=60))\n"
    "p = d.PrefixStore('/worker/attempt_1', s)\n"
    "p.set('from-torch', 'hello hftrain')\n"
    "p.add('counter', 5)\n"
    "print('torch peer ready', flush=True)\n"
    "v = p.get('from-hftrain').decode()\n"
    "print('torch read ' + v + ', counter ' + p.get('counter').decode() + ', cas ' + p.get('cas').decode(), flush=True)\n";

// Debian's torch 1.13 launcher under Python >= 3.11: Std.from_str("0") finds no member (IntFlag iteration
// skips 0) and torchrun fails before starting a worker; the shim returns Std.NONE there and runs it.
const char* kLauncherShim =
    "import runpy, sys\n"
    "from torch.distributed.elastic.multiprocessing import api\n"
    "_from_str = api.Std.from_str.__func__\n"
    "api.Std.from_str = classmethod(lambda cls, vm: api.Std.NONE if _from_str(cls, vm) is None else _from_str(cls, vm))\n"
    "module = sys.argv.pop(1)\n"
    "sys.argv[0] = module\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n";

// A process with its stdout+stderr on a pipe (Child from test_dist_helpers.h).
Child spawn(const std::vector<std::string>& argv, const std::string& cwd) {
  int p[2];
  if (::pipe(p) != 0) return {};
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(p[1]);
  c.fd = p[0];
  return c;
}

// Waits up to `seconds` for every process, reading their output as it comes (so none blocks on a full
// pipe); the exit codes, -1 for a process still running then, which is killed.
std::vector<int> finish_all(std::vector<Child>& children, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  std::vector<int> codes(children.size(), -1);
  std::vector<bool> done(children.size(), false);
  for (std::size_t left = children.size(); left > 0 && std::chrono::steady_clock::now() < deadline;)
    for (std::size_t i = 0; i < children.size(); ++i)
      if (!done[i] && (codes[i] = children[i].wait(0.1)) != -1) {
        done[i] = true;
        --left;
      }
  for (std::size_t i = 0; i < children.size(); ++i)
    if (!done[i]) {
      ::kill(children[i].pid, SIGKILL);
      children[i].wait(10);
    }
  return codes;
}

// The single-process run with the global batch (6, x2 accumulation) that every 2-worker run must follow.
std::vector<nlohmann::json> reference_losses(const std::string& dir) {
  CliResult ref = run_hftrain("train spec.yaml --set training.output_dir=ref", dir);
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  return train_logs(dir + "/ref/trainer_state.json");
}

// Two workers' trajectory against the single-process one, as test_dist_training.cpp checks it.
void check_follows(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << got[i]["step"]);
    const double want_loss = expected[i]["loss"], loss = got[i]["loss"];
    CHECK(std::abs(loss - want_loss) <= 5e-5 + 1e-5 * std::abs(want_loss));
    const double want_norm = expected[i]["grad_norm"], norm = got[i]["grad_norm"];
    CHECK(std::abs(norm - want_norm) <= 1e-5 * std::abs(want_norm));
    CHECK(got[i]["learning_rate"] == expected[i]["learning_rate"]);
  }
}

}  // namespace

TEST_CASE("hftrain's TCPStore client and torch's own client share the keys of a torch TCPStore",
          "[integration][dist][torchrun]") {
  if (!torch_distributed_available()) {
    std::cout << "HFTRAIN_TEST_SKIPPED: python3-torch is not installed; no torch TCPStore to talk to\n";
    return;
  }
  const std::string dir = dist_dir("torch_store_peer");
  write_text(dir + "/peer.py", kTorchPeer);
  const int port = hftrain::free_loopback_port();
  Child peer = spawn({kPython, "peer.py", std::to_string(port)}, dir);
  REQUIRE(peer.read_until("torch peer ready", 120));
  INFO(peer.output);
  std::string error;
  auto store = hftrain::TorchStoreClient::connect("127.0.0.1", port, 1, std::chrono::seconds(30), error);
  INFO(error);
  REQUIRE(store);
  auto text = [](const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); };
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  CHECK(text(store->get("from-torch")) == "hello hftrain");
  CHECK(store->add("counter", 2) == 7);
  CHECK(store->check({"from-torch", "counter"}));
  CHECK_FALSE(store->check({"from-torch", "absent"}));
  store->wait({"from-torch", "counter"}, std::chrono::seconds(5));
  CHECK(text(store->compareSet("cas", {}, bytes("v1"))) == "v1");
  CHECK(text(store->compareSet("cas", bytes("other"), bytes("v2"))) == "v1");
  CHECK(text(store->compareSet("cas", bytes("v1"), bytes("v2"))) == "v2");
  store->set("scratch", bytes("x"));
  CHECK(store->deleteKey("scratch"));
  CHECK_FALSE(store->deleteKey("scratch"));
  CHECK(store->getNumKeys() >= 3);
  // A wait that times out names the key and the store, and is bounded by its timeout.
  auto other = hftrain::TorchStoreClient::connect("127.0.0.1", port, 1, std::chrono::seconds(30), error);
  REQUIRE(other);
  CHECK_THROWS_WITH(other->wait({"never-set"}, std::chrono::milliseconds(300)),
                    Catch::Contains("agent store at 127.0.0.1:" + std::to_string(port) + ": wait for never-set: no answer"));
  // The last key: the peer reads it and ends.
  store->set("from-hftrain", bytes("hello torch"));
  CHECK(peer.read_until("torch read hello torch, counter 7, cas v2", 60));
  CHECK(peer.wait(30) == 0);
  fs::remove_all(dir);
}

TEST_CASE("workers in torchrun's agent-store environment join its TCPStore as clients and train as one process",
          "[integration][dist][torchrun]") {
  if (!torch_distributed_available()) {
    std::cout << "HFTRAIN_TEST_SKIPPED: python3-torch is not installed; no TCPStore to play torchrun's agent\n";
    return;
  }
  const std::string dir = dist_dir("torchrun_agent_store");
  write_text(dir + "/spec.yaml", dist_spec(4));
  write_text(dir + "/agent_store.py", kAgentStore);
  const auto expected = reference_losses(dir);
  REQUIRE(expected.size() == 4);

  const int port = hftrain::free_loopback_port();
  Child store = spawn({kPython, "agent_store.py", std::to_string(port)}, dir);
  REQUIRE(store.read_until("agent store ready", 120));
  // The environment torchrun's agent gives its workers (torch/distributed/elastic/agent/server/
  // local_elastic_agent.py), on one node of two workers.
  std::vector<Child> workers;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    workers.push_back(spawn_hftrain(
        {"train", "spec.yaml", "--set", "training.per_device_train_batch_size=3", "--set", "training.output_dir=agent",
         "--set", "distributed.rendezvous_timeout=60"},
        dir,
        {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "RANK=" + r, "WORLD_SIZE=2", "LOCAL_RANK=" + r,
         "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "ROLE_RANK=" + r, "ROLE_WORLD_SIZE=2", "TORCHELASTIC_USE_AGENT_STORE=True",
         "TORCHELASTIC_RUN_ID=hftrain-test", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0"}));
  }
  const std::vector<int> codes = finish_all(workers, 240);
  store.read_until("agent store saw the verdict", 5);
  ::kill(store.pid, SIGTERM);
  store.wait(10);
  INFO("rank 0:\n" << workers[0].output << "\nrank 1:\n" << workers[1].output << "\nagent store:\n" << store.output);
  CHECK(workers[0].output.find("cannot listen") == std::string::npos);
  REQUIRE(codes[0] == 0);
  REQUIRE(codes[1] == 0);
  // The ranks met in the agent's store, where torch's own workers put their keys.
  CHECK_THAT(store.output, Catch::Contains("agent store saw the verdict {\"code\":2,\"message\":\"\",\"ok\":true}"));
  check_follows(train_logs(dir + "/agent/trainer_state.json"), expected);
  fs::remove_all(dir);
}

TEST_CASE("torchrun --no_python starts hftrain workers that train through its agent store",
          "[integration][dist][torchrun]") {
  if (!torch_distributed_available()) {
    std::cout << "HFTRAIN_TEST_SKIPPED: python3-torch is not installed; no torchrun to start the workers\n";
    return;
  }
  const std::string dir = dist_dir("torchrun_launch");
  write_text(dir + "/spec.yaml", dist_spec(4));
  write_text(dir + "/launcher.py", kLauncherShim);
  const auto expected = reference_losses(dir);
  REQUIRE(expected.size() == 4);
  // The launch line of docs/distributed.md, with the port chosen free.
  const std::string launch = std::string(kPython) + " launcher.py torch.distributed.run --nproc_per_node 2 --master_port " +
                             std::to_string(hftrain::free_loopback_port()) + " --no_python '" + HFTRAIN_BINARY +
                             "' train spec.yaml --set training.per_device_train_batch_size=3"
                             " --set training.output_dir=torchrun --set distributed.rendezvous_timeout=60 2>&1";
  CliResult r = run_shell("cd '" + dir + "' && timeout 300 " + launch);
  INFO(r.output);
  CHECK(r.output.find("cannot listen") == std::string::npos);
  REQUIRE(r.exit_code == 0);
  check_follows(train_logs(dir + "/torchrun/trainer_state.json"), expected);
  fs::remove_all(dir);
}
