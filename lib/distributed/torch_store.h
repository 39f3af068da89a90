// A client of torch's own c10d::TCPStore, for the store torchrun's elastic agent hosts at
// MASTER_ADDR:MASTER_PORT when it starts its workers with TORCHELASTIC_USE_AGENT_STORE=True (torch's
// env:// rendezvous then connects every rank to it as a client, and so does hftrain). It speaks
// TCPStore's wire protocol as torch 1.13 does (the LibTorch hftrain is built on): a query is one type
// byte then its fields, strings and values as a uint64 length and the bytes, counts as uint64, numbers
// as int64, all in host byte order; SET has no reply; CHECK and WAIT answer one byte; get() is a WAIT
// and then a GET. Every key carries TCPStore's "/" and the scope torch's workers use
// (PrefixStore "/worker/attempt_<restart>"), so each restart of the job meets in fresh keys. No token:
// torch's store has none. No operation runs longer than the store's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hftrain {

// The bytes of TCPStore's queries and the parsing of its replies, apart from any socket.
namespace tcpstore_wire {

enum class Query : uint8_t { kSet = 0, kCompareSet, kGet, kAdd, kCheck, kWait, kGetNumKeys, kWatchKey, kDeleteKey };
constexpr uint8_t kReady = 0;        // CHECK: every key is there (1 = not yet)
constexpr uint8_t kStopWaiting = 0;  // WAIT: every key is there

// A query being built: the type byte, then fields in order.
class Request {
 public:
  explicit Request(Query q) : bytes_(1, static_cast<char>(q)) {}
  Request& text(const std::string& s);  // uint64 length + bytes
  Request& count(uint64_t n);           // uint64
  Request& number(int64_t v);           // int64
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

enum class Reply { kNone, kByte, kNumber, kText };
// Parses a reply of `shape` at the start of `in`: true with `value` (the byte or the int64 as decimal
// text, or the text itself) and `used` bytes when it is complete (kNone: at once, nothing used), false
// while bytes are missing.
bool parse_reply(Reply shape, const std::string& in, std::string& value, std::size_t& used);

// The key on the wire for `key` in the scope torch's workers use for attempt `restart`:
// "/" (TCPStore's own prefix) + "/worker/attempt_<restart>" + "/" + key.
std::string agent_key(int restart, const std::string& key);

}  // namespace tcpstore_wire

class TorchStoreClient : public c10d::Store {
 public:
  // Connects to the TCPStore at host:port and checks that it answers as torch 1.13's does (GETNUMKEYS).
  // Returns nullptr (with `error` set) when nothing listens there yet; throws RuntimeFailure when the
  // peer is not such a store (it closes the connection or does not answer within 10 s).
  static c10::intrusive_ptr<TorchStoreClient> connect(const std::string& host, int port, int restart,
                                                      std::chrono::milliseconds timeout, std::string& error);
  TorchStoreClient(int fd, std::string host, int port, int restart, std::chrono::milliseconds timeout);
  ~TorchStoreClient() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;  // every key of the store, the agent's included (as TCPStore counts)
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // A second connection to the same store (LibTorch 2.x declares clone() in c10d::Store).
  c10::intrusive_ptr<c10d::Store> clone();

 private:
  std::string key(const std::string& k) const { return tcpstore_wire::agent_key(restart_, k); }
  // Sends `request` and reads its reply (none for kNone); throws naming `what` on a closed connection
  // or after `timeout`, after which the connection is not used again.
  std::string exchange(const tcpstore_wire::Request& request, tcpstore_wire::Reply reply, const std::string& what,
                       std::chrono::milliseconds timeout);
  std::string exchange(const tcpstore_wire::Request& request, tcpstore_wire::Reply reply, const std::string& what) {
    return exchange(request, reply, what, timeout_);
  }
  void wait_for(const std::vector<std::string>& wire_keys, const std::string& what, std::chrono::milliseconds timeout);

  int fd_ = -1;
  std::string host_;
  int port_ = 0;
  int restart_ = 0;
  bool broken_ = false;
  std::mutex mu_;
};

}  // namespace hftrain
