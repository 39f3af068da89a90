// The client of torch's TCPStore (torchrun's agent store) without torch: the bytes of its queries as
// torch 1.13's TCPStore lays them out (type byte; uint64 lengths, counts; int64 numbers; host order),
// reply parsing, the worker scope of its keys, and a peer that is not a TCPStore.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>

#include "distributed/launcher.h"
#include "distributed/store.h"
#include "distributed/torch_store.h"
#include "util/error.h"

using namespace hftrain;
using namespace hftrain::tcpstore_wire;

namespace {

std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string i64(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

TEST_CASE("TCPStore queries carry torch 1.13's type bytes and field layout", "[unit][dist][rendezvous]") {
  // QueryType in torch 1.13's TCPStore.cpp: SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, WATCH_KEY, DELETE_KEY.
  CHECK(static_cast<int>(Query::kSet) == 0);
  CHECK(static_cast<int>(Query::kGet) == 2);
  CHECK(static_cast<int>(Query::kWait) == 5);
  CHECK(static_cast<int>(Query::kGetNumKeys) == 6);
  CHECK(static_cast<int>(Query::kDeleteKey) == 8);
  CHECK(Request(Query::kSet).text("/k").text("value").bytes() == std::string(1, '\0') + u64(2) + "/k" + u64(5) + "value");
  CHECK(Request(Query::kAdd).text("/n").number(-3).bytes() == std::string(1, '\3') + u64(2) + "/n" + i64(-3));
  CHECK(Request(Query::kWait).count(2).text("/a").text("/bc").bytes() ==
        std::string(1, '\5') + u64(2) + u64(2) + "/a" + u64(3) + "/bc");
  CHECK(Request(Query::kGetNumKeys).bytes() == std::string(1, '\6'));
}

TEST_CASE("TCPStore replies are parsed once complete", "[unit][dist][rendezvous]") {
  std::string value;
  std::size_t used = 0;
  const std::string text = u64(3) + "abc";
  CHECK_FALSE(parse_reply(Reply::kText, text.substr(0, 10), value, used));
  REQUIRE(parse_reply(Reply::kText, text + "more", value, used));
  CHECK(value == "abc");
  CHECK(used == 11);
  CHECK_FALSE(parse_reply(Reply::kNumber, i64(42).substr(0, 7), value, used));
  REQUIRE(parse_reply(Reply::kNumber, i64(-42), value, used));
  CHECK(value == "-42");
  REQUIRE(parse_reply(Reply::kByte, std::string(1, '\1'), value, used));
  CHECK(value == "1");
  REQUIRE(parse_reply(Reply::kNone, "", value, used));
  CHECK(used == 0);
}

TEST_CASE("keys in the agent's store live in torch's worker scope of the attempt", "[unit][dist][rendezvous]") {
  // torch's env:// rendezvous: PrefixStore("/worker/attempt_<restart>", TCPStore), whose keys get TCPStore's "/".
  CHECK(agent_key(0, "hftrain/rdzv/verdict") == "//worker/attempt_0/hftrain/rdzv/verdict");
  CHECK(agent_key(2, "x") == "//worker/attempt_2/x");
}

TEST_CASE("the agent-store client waits while nothing listens and refuses a peer that is not a TCPStore",
          "[unit][dist][rendezvous]") {
  std::string error;
  const int free_port = free_loopback_port();
  CHECK_FALSE(TorchStoreClient::connect("127.0.0.1", free_port, 0, std::chrono::milliseconds(500), error));
  CHECK_THAT(error, Catch::Contains("refused"));
  // hftrain's own store does not answer a TCPStore query: named, within the store timeout.
  StoreServer server("127.0.0.1", 0, "secret");
  CHECK_THROWS_WITH(TorchStoreClient::connect("127.0.0.1", server.port(), 0, std::chrono::milliseconds(300), error),
                    Catch::Contains("TCPStore protocol of torch 1.13"));
}
