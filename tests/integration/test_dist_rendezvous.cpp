// The rendezvous through the real binary: a node that never comes up (waiting lines, exit 1 naming it
// and the address within a short distributed.rendezvous_timeout), a node 0 that never comes up, nodes
// started with different configurations, and a single-node job whose sockets all listen on 127.0.0.1
// and whose store refuses a connection with a wrong token while the job runs on.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <set>

#include "distributed/launcher.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> node_args(int node_rank, int port, const std::string& timeout_s) {
  return {"train", "spec.yaml", "--nnodes", "2", "--node-rank", std::to_string(node_rank), "--master-addr", "127.0.0.1",
          "--master-port", std::to_string(port), "--set", "distributed.rendezvous_timeout=" + timeout_s};
}

// An environment variable of a running process ("" when absent).
std::string env_of(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t pos = 0;
  while (pos < env.size()) {
    std::size_t end = env.find('\0', pos);
    if (end == std::string::npos) end = env.size();
    const std::string kv = env.substr(pos, end - pos);
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
    pos = end + 1;
  }
  return "";
}

// Socket inodes a process holds.
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) out.insert(target.substr(8, target.size() - 9));
  }
  return out;
}

struct Listener {
  std::string address;  // "127.0.0.1:29500" (IPv4) or "ipv6 ..." for a tcp6 entry
  int port = 0;
};

// Listening TCP sockets among `inodes` (from /proc/net/tcp and tcp6).
std::vector<Listener> listeners(const std::set<std::string>& inodes) {
  std::vector<Listener> out;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      row >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;
      const auto colon = local.rfind(':');
      Listener l;
      l.port = std::stoi(local.substr(colon + 1), nullptr, 16);
      if (std::string(file).back() == '6') {
        l.address = "ipv6 " + local.substr(0, colon);
      } else {
        in_addr a{};
        a.s_addr = static_cast<uint32_t>(std::stoul(local.substr(0, colon), nullptr, 16));
        char buf[INET_ADDRSTRLEN];
        l.address = ::inet_ntop(AF_INET, &a, buf, sizeof buf);
      }
      out.push_back(l);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a second node that never comes up: waiting lines, then exit 1 naming node_rank 1 and the address",
          "[integration][dist][rendezvous]") {
  const std::string dir = dist_dir("rdzv_missing_node");
  write_text(dir + "/spec.yaml", dist_spec(4));
  const int port = hftrain::free_loopback_port();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  const auto t0 = std::chrono::steady_clock::now();
  CliResult r = run_hftrain("train spec.yaml --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port " +
                                std::to_string(port) + " --set distributed.rendezvous_timeout=3",
                            dir);
  const double took = since(t0);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("waiting for 1 of 2 nodes (node_rank 1) at " + where + " \xE2\x80\x94 1 s of 3 s") != std::string::npos);
  CHECK(r.output.find("waiting for 1 of 2 nodes (node_rank 1) at " + where + " \xE2\x80\x94 2 s of 3 s") != std::string::npos);
  CHECK(r.output.find("node_rank 1 (rank 1) never joined at " + where +
                      " within distributed.rendezvous_timeout (3 s)") != std::string::npos);
  CHECK(took >= 3.0);
  CHECK(took < 300.0);  // the rendezvous timeout (3 s) ended it, not the default one (600 s) nor ddp_timeout (1800 s)
  fs::remove_all(dir);
}

TEST_CASE("a node whose node 0 never comes up waits for it, then exits 1 naming node_rank 0 and the address",
          "[integration][dist][rendezvous]") {
  const std::string dir = dist_dir("rdzv_missing_master");
  write_text(dir + "/spec.yaml", dist_spec(4));
  const int port = hftrain::free_loopback_port();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  CliResult r = run_hftrain("train spec.yaml --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port " +
                                std::to_string(port) + " --set distributed.rendezvous_timeout=2",
                            dir);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("waiting for node_rank 0 to open the rendezvous at " + where) != std::string::npos);
  CHECK(r.output.find("node_rank 0 (rank 0) never opened the rendezvous at " + where) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("two nodes started with different learning rates stop before any step, naming the key and both values",
          "[integration][dist][rendezvous]") {
  const std::string dir = dist_dir("rdzv_mixed_config");
  write_text(dir + "/spec.yaml", dist_spec(4));
  const int port = hftrain::free_loopback_port();
  Child node0 = spawn_hftrain(node_args(0, port, "30"), dir);
  auto args1 = node_args(1, port, "30");
  args1.insert(args1.end(), {"--set", "training.learning_rate=0.01"});
  Child node1 = spawn_hftrain(args1, dir);
  const int code0 = node0.wait(60), code1 = node1.wait(60);
  INFO(node0.output);
  INFO(node1.output);
  CHECK(code0 == 2);  // a configuration error, on both nodes
  CHECK(code1 == 2);
  const std::string diff = "training.learning_rate: '0.003' on node_rank 0 (rank 0), '0.01' on node_rank 1 (rank 1)";
  for (const std::string* out : {&node0.output, &node1.output}) {
    CHECK(out->find("node_rank 1 (rank 1) (host ") != std::string::npos);
    CHECK(out->find("1 differing key\n") != std::string::npos);
    CHECK(out->find(diff) != std::string::npos);
  }
  CHECK(node0.output.find("exited with code 2") != std::string::npos);  // a configuration error on the worker
  CHECK(node0.output.find("step 1/") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("two nodes whose data file differs under the same path stop before any step, naming the data",
          "[integration][dist][rendezvous]") {
  // Each node runs in its own directory: the same spec and path, one character of the corpus swapped.
  const std::string base = dist_dir("rdzv_mixed_data");
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "the quick brown fox jumps over the lazy dog\n";
  std::string other = corpus;
  std::swap(other[4], other[5]);
  const std::string spec = "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}\n"
                           "data: {type: text_file, path: corpus.txt, tokenizer: chars, block_size: 16}\n"
                           "training: {output_dir: out, per_device_train_batch_size: 4, max_steps: 2, save_strategy: \"no\"}\n";
  for (const std::string node : {"a", "b"}) {
    fs::create_directories(base + "/" + node);
    write_text(base + "/" + node + "/spec.yaml", spec);
    write_text(base + "/" + node + "/corpus.txt", node == "a" ? corpus : other);
  }
  const int port = hftrain::free_loopback_port();
  Child node0 = spawn_hftrain(node_args(0, port, "30"), base + "/a");
  Child node1 = spawn_hftrain(node_args(1, port, "30"), base + "/b");
  const int code0 = node0.wait(60), code1 = node1.wait(60);
  INFO(node0.output);
  INFO(node1.output);
  CHECK(code0 == 2);
  CHECK(code1 == 2);
  CHECK(node0.output.find("file:data.path: '1760 bytes, content hash ") != std::string::npos);
  CHECK(node0.output.find("step 1/") == std::string::npos);
  fs::remove_all(base);
}

TEST_CASE("a single-node job listens on 127.0.0.1 only and refuses a connection with a wrong token",
          "[integration][dist][rendezvous]") {
  const std::string dir = dist_dir("rdzv_loopback");
  write_text(dir + "/spec.yaml", dist_spec(60));
  Child c = spawn_hftrain({"train", "spec.yaml", "--nproc-per-node", "2", "--set", "training.per_device_train_batch_size=3"},
                          dir, {"HFTRAIN_FAULT_INJECT=step_delay_ms:50"});
  REQUIRE(c.read_until("step 3/", 60));
  std::set<std::string> inodes;
  int store_port = 0;
  for (pid_t p : children_of(c.pid)) {
    auto mine = socket_inodes(p);
    inodes.insert(mine.begin(), mine.end());
    if (rank_of(p) == 0) store_port = std::stoi(env_of(p, "MASTER_PORT"));
  }
  REQUIRE(store_port > 0);
  const auto found = listeners(inodes);
  bool store_listens = false;
  for (const auto& l : found) {
    INFO("listening: " << l.address << ":" << l.port);
    CHECK(l.address == "127.0.0.1");  // the store and Gloo's own sockets: loopback only, no *:PORT, no IPv6
    store_listens = store_listens || l.port == store_port;
  }
  CHECK(store_listens);
  // A stranger on this machine that reaches the port without the job token is refused; the job runs on.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(store_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::string hello(1, '\x01');
  auto put = [&](uint32_t v) { hello.append(reinterpret_cast<const char*>(&v), 4); };
  put(2);
  put(5);
  hello += "guess";
  put(8);
  hello += "stranger";
  REQUIRE(::write(fd, hello.data(), hello.size()) == static_cast<ssize_t>(hello.size()));
  char buf[512];
  std::string reply;
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) reply.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  CHECK(reply.find("wrong job token") != std::string::npos);
  const int code = c.wait(120);
  INFO(c.output);
  CHECK(code == 0);
  CHECK(c.output.find("rendezvous store: refused a connection from 127.0.0.1:") != std::string::npos);
  CHECK(c.output.find("wrong job token (HFTRAIN_RDZV_TOKEN) from 'stranger'") != std::string::npos);
  fs::remove_all(dir);
}
