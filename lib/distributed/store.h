// The rendezvous key-value store: our own replacement for c10d::TCPStore, which in LibTorch 1.13
// always listens on every interface (`*:PORT`) and lets anyone who reaches the port read and write
// keys. StoreServer (hosted by rank 0) listens on one address only (loopback for a single-node job, the
// master address's interface otherwise) and accepts a connection only after it presents the job token;
// any other connection is refused, logged, and the job runs on. StoreClient is a c10d::Store, so Gloo's
// process group uses it as it would a TCPStore. Semantics follow TCPStore: get() waits for its key,
// add() keeps integers as decimal text, compareSet() as in c10d. No operation runs longer than the
// store's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace hftrain {

class StoreServer {
 public:
  // Listens on `host` (an address or a name resolving to one of this machine's addresses) at `port`.
  // `token` "" accepts any client that speaks the protocol. Throws RuntimeFailure when it cannot listen
  // (port in use, not an address of this machine).
  StoreServer(const std::string& host, int port, std::string token);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The numeric address and port it listens on ("127.0.0.1", 29500).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // Connections refused so far (wrong or missing token), for tests and reports.
  int refused_count() const { return refused_.load(); }

 private:
  struct Conn;
  struct Waiter;
  void loop();
  void handle_readable(Conn& c);
  bool handle_message(Conn& c, uint8_t op, std::vector<std::string>& args);  // false: close the connection
  void refuse(Conn& c, const std::string& why);
  void wake_waiters();
  void close_conn(int fd);

  std::string token_, address_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<int> refused_{0};
  std::map<int, Conn*> conns_;
  std::vector<Waiter*> waiters_;
  std::map<std::string, std::string> data_;
};

// A TCP connection to a StoreServer. connect() makes one attempt; the rendezvous retries it.
class StoreClient : public c10d::Store {
 public:
  // Connects to host:port and presents `token`. Returns nullptr (with `error` set: "connection
  // refused", ...) when the server cannot be reached; throws RuntimeFailure when it refuses the token.
  static c10::intrusive_ptr<StoreClient> connect(const std::string& host, int port, const std::string& token,
                                                 const std::string& who, std::chrono::milliseconds timeout,
                                                 std::string& error);
  explicit StoreClient(int fd, std::string where, std::chrono::milliseconds timeout);
  ~StoreClient() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // A second connection to the same server, as c10d's TCPStore::clone gives (LibTorch 2.x declares clone()
  // in c10d::Store; on 1.13 this is a plain member nobody calls).
  c10::intrusive_ptr<c10d::Store> clone();

  // String forms for hftrain's own keys.
  void set_text(const std::string& key, const std::string& value);
  std::string get_text(const std::string& key);

 private:
  // One request and its reply; throws (naming the operation) on a closed connection or after `timeout`.
  std::vector<std::string> call(uint8_t op, const std::vector<std::string>& args, const std::string& what,
                                std::chrono::milliseconds timeout);
  std::vector<std::string> call(uint8_t op, const std::vector<std::string>& args, const std::string& what) {
    return call(op, args, what, timeout_);
  }

  int fd_ = -1;
  std::string where_;
  std::string host_, token_, who_;  // what connect() was given, for clone()
  int port_ = 0;
  bool broken_ = false;  // a reply timed out or the connection closed: no further use
  std::mutex mu_;
};

}  // namespace hftrain
