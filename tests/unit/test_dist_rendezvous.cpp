// The rendezvous store (token, loopback-only listening, TCPStore semantics) and the rendezvous itself
// (missing rank, disagreeing ranks), in one process on loopback with bounded timeouts.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "distributed/env.h"
#include "distributed/launcher.h"
#include "distributed/rendezvous.h"
#include "distributed/store.h"
#include "util/error.h"

using namespace hftrain;

namespace {

c10::intrusive_ptr<StoreClient> client(int port, const std::string& token, int timeout_ms = 5000) {
  std::string error;
  auto c = StoreClient::connect("127.0.0.1", port, token, "test", std::chrono::milliseconds(timeout_ms), error);
  INFO(error);
  REQUIRE(c);
  return c;
}

// Local addresses (as "a.b.c.d") of the sockets listening on `port` in /proc/net/tcp, and whether
// /proc/net/tcp6 has one.
std::vector<std::string> ipv4_listeners(int port, bool& ipv6_listener) {
  std::vector<std::string> out;
  ipv6_listener = false;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string slot, local, remote, state;
      row >> slot >> local >> remote >> state;
      const auto colon = local.rfind(':');
      if (state != "0A" || std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
      if (std::string(file).back() == '6') {
        ipv6_listener = true;
        continue;
      }
      const uint32_t raw = static_cast<uint32_t>(std::stoul(local.substr(0, colon), nullptr, 16));  // host order bytes
      char buf[INET_ADDRSTRLEN];
      in_addr a{};
      a.s_addr = raw;
      out.push_back(::inet_ntop(AF_INET, &a, buf, sizeof buf));
    }
  }
  return out;
}

DistEnv two_rank_env(int rank, int port) {
  DistEnv env;
  env.rank = rank;
  env.world_size = 2;
  env.local_rank = 0;
  env.local_world_size = 1;  // two nodes of one worker each
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.source = "torchrun";
  return env;
}

}  // namespace

TEST_CASE("rendezvous store listens on 127.0.0.1 only and keeps TCPStore's semantics", "[unit][dist][rendezvous]") {
  StoreServer server("127.0.0.1", 0, "secret");
  REQUIRE(server.port() > 0);
  CHECK(server.address() == "127.0.0.1");
  bool ipv6 = true;
  CHECK(ipv4_listeners(server.port(), ipv6) == std::vector<std::string>{"127.0.0.1"});
  CHECK_FALSE(ipv6);

  auto a = client(server.port(), "secret");
  auto b = client(server.port(), "secret");
  a->set_text("k", "v1");
  CHECK(b->get_text("k") == "v1");
  CHECK(a->add("n", 5) == 5);
  CHECK(b->add("n", -2) == 3);
  CHECK(a->get_text("n") == "3");  // integers as decimal text, as TCPStore keeps them
  CHECK(a->check({"k", "n"}));
  CHECK_FALSE(a->check({"k", "absent"}));
  CHECK(a->getNumKeys() == 2);
  // compareSet: absent key and empty expectation sets it; a wrong expectation returns the current value.
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  CHECK(a->compareSet("c", {}, bytes("x")) == bytes("x"));
  CHECK(a->compareSet("c", bytes("wrong"), bytes("y")) == bytes("x"));
  CHECK(a->compareSet("c", bytes("x"), bytes("y")) == bytes("y"));
  CHECK(a->deleteKey("c"));
  CHECK_FALSE(a->deleteKey("c"));
  // clone() (pure virtual in LibTorch 2.x's c10d::Store): a second connection to the same store, usable
  // while the first one waits.
  auto twin = c10::static_intrusive_pointer_cast<StoreClient>(a->clone());
  REQUIRE(twin);
  CHECK(twin.get() != a.get());
  CHECK(twin->get_text("k") == "v1");
  twin->set_text("from_twin", "t");
  CHECK(b->get_text("from_twin") == "t");
  // get() waits for a key another client sets later.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    b->set_text("late", "here");
  });
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(a->get_text("late") == "here");
  later.join();
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= 0.25);
  // A get that nobody answers fails after the client's timeout, naming the key.
  auto impatient = client(server.port(), "secret", 300);
  try {
    impatient->get_text("never");
    FAIL("get of a key nobody sets returned");
  } catch (const RuntimeFailure& e) {
    CHECK_THAT(e.what(), Catch::Contains("get never") && Catch::Contains("no answer within"));
  }
}

TEST_CASE("rendezvous store refuses a wrong token and a stranger, and serves its workers on", "[unit][dist][rendezvous]") {
  StoreServer server("127.0.0.1", 0, "secret");
  auto good = client(server.port(), "secret");
  good->set_text("k", "v");
  std::string error;
  try {
    StoreClient::connect("127.0.0.1", server.port(), "guess", "intruder", std::chrono::milliseconds(2000), error);
    FAIL("a wrong token was accepted");
  } catch (const RuntimeFailure& e) {
    CHECK_THAT(e.what(), Catch::Contains("refused: wrong job token") && Catch::Contains("HFTRAIN_RDZV_TOKEN"));
  }
  // A raw connection that speaks something else (an HTTP probe) is closed without an answer to it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string probe = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::write(fd, probe.data(), probe.size()) == static_cast<ssize_t>(probe.size()));
  char buf[256];
  ssize_t n = 0, total = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) total += n;  // the server closes the connection
  ::close(fd);
  CHECK(n == 0);
  CHECK(server.refused_count() == 2);
  CHECK(good->get_text("k") == "v");  // the job's own client is unaffected
  CHECK(client(server.port(), "secret")->get_text("k") == "v");
}

TEST_CASE("rendezvous with a rank that never comes names it and the address, within the timeout",
          "[unit][dist][rendezvous]") {
  const int port = free_loopback_port();
  RendezvousOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  o.token = "t";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    rendezvous(two_rank_env(0, port), o);
    FAIL("the rendezvous completed with a rank missing");
  } catch (const RuntimeFailure& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("node_rank 1 (rank 1) never joined at 127.0.0.1:" + std::to_string(port)));
    CHECK_THAT(msg, Catch::Contains("distributed.rendezvous_timeout (1.5 s)"));
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took >= 1.5);
  CHECK(took < 300.0);  // the given timeout (1.5 s) ended it, not the default rendezvous_timeout (600 s)
}

TEST_CASE("rendezvous stops both ranks when their configurations differ, naming the key and both values",
          "[unit][dist][rendezvous]") {
  const int port = free_loopback_port();
  auto options = [](const std::string& lr) {
    RendezvousOptions o;
    o.timeout = std::chrono::seconds(20);
    o.token = "t";
    o.facts = flatten_yaml("training:\n  learning_rate: " + lr + "\n  seed: 42\nmodel: {type: gpt}\n");
    return o;
  };
  std::string msg0, msg1;
  std::thread other([&] {
    try {
      rendezvous(two_rank_env(1, port), options("0.01"));
    } catch (const ConfigError& e) {
      msg1 = e.what();
    } catch (const std::exception& e) {
      msg1 = std::string("wrong kind of error: ") + e.what();
    }
  });
  try {
    rendezvous(two_rank_env(0, port), options("0.003"));
  } catch (const ConfigError& e) {
    msg0 = e.what();
  }
  other.join();
  CHECK_THAT(msg0, Catch::Contains("node_rank 1 (rank 1)") && Catch::Contains("1 differing key") &&
                       Catch::Contains("training.learning_rate: '0.003' on node_rank 0 (rank 0), '0.01' on node_rank 1 (rank 1)"));
  CHECK_THAT(msg0, !Catch::Contains("training.seed"));
  CHECK_THAT(msg1, Catch::Contains("training.learning_rate") && Catch::Contains("(reported by rank 0)"));
}

TEST_CASE("agreement facts: flattened YAML and fingerprints of the files they name", "[unit][dist][rendezvous]") {
  const AgreementFacts flat = flatten_yaml("a: {b: 1, c: [x, y]}\nd: ~\n");
  CHECK(flat == AgreementFacts{{"a.b", "1"}, {"a.c[0]", "x"}, {"a.c[1]", "y"}, {"d", "null"}});
  const std::string path = "/tmp/hftrain_ut_rdzv_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << "one";
  AgreementFacts f1{{"data.train_file", path}, {"x", "not a file"}};
  add_file_fingerprints(f1);
  REQUIRE(f1.size() == 3);
  CHECK(f1[2].first == "file:data.train_file");
  CHECK_THAT(f1[2].second, Catch::StartsWith("3 bytes, content hash "));
  std::ofstream(path) << "two";  // same size, other contents
  AgreementFacts f2{{"data.train_file", path}};
  add_file_fingerprints(f2);
  CHECK(f2[1].second != f1[2].second);
  std::remove(path.c_str());
}
