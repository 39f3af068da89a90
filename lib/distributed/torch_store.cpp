// A client of torch's c10d::TCPStore, torch 1.13's wire protocol (see torch_store.h).
#include "distributed/torch_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "distributed/tcp_socket.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace tcpstore_wire {
namespace {

template <typename T>
void append_raw(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T read_raw(const std::string& in, std::size_t at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace

Request& Request::text(const std::string& s) {
  append_raw<uint64_t>(bytes_, s.size());
  bytes_ += s;
  return *this;
}

Request& Request::count(uint64_t n) {
  append_raw<uint64_t>(bytes_, n);
  return *this;
}

Request& Request::number(int64_t v) {
  append_raw<int64_t>(bytes_, v);
  return *this;
}

bool parse_reply(Reply shape, const std::string& in, std::string& value, std::size_t& used) {
  switch (shape) {
    case Reply::kNone:
      value.clear();
      used = 0;
      return true;
    case Reply::kByte:
      if (in.empty()) return false;
      value = std::to_string(static_cast<unsigned char>(in[0]));
      used = 1;
      return true;
    case Reply::kNumber:
      if (in.size() < 8) return false;
      value = std::to_string(read_raw<int64_t>(in, 0));
      used = 8;
      return true;
    case Reply::kText: {
      if (in.size() < 8) return false;
      const uint64_t n = read_raw<uint64_t>(in, 0);
      if (in.size() - 8 < n) return false;
      value = in.substr(8, n);
      used = 8 + n;
      return true;
    }
  }
  return false;
}

std::string agent_key(int restart, const std::string& key) {
  return "//worker/attempt_" + std::to_string(restart) + "/" + key;
}

}  // namespace tcpstore_wire

using tcpstore_wire::Query;
using tcpstore_wire::Reply;
using tcpstore_wire::Request;
using Clock = std::chrono::steady_clock;

namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  return std::to_string(static_cast<double>(d.count()) / 1000.0).substr(0, 6) + " s";
}

}  // namespace

c10::intrusive_ptr<TorchStoreClient> TorchStoreClient::connect(const std::string& host, int port, int restart,
                                                               std::chrono::milliseconds timeout, std::string& error) {
  const int fd = tcp_connect(host, port, error);
  if (fd < 0) return {};
  auto client = c10::make_intrusive<TorchStoreClient>(fd, host, port, restart, timeout);
  const auto probe = std::chrono::milliseconds(std::min<int64_t>(timeout.count() > 0 ? timeout.count() : 10000, 10000));
  try {
    client->exchange(Request(Query::kGetNumKeys), Reply::kNumber, "joining", probe);
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(std::string(e.what()) +
                         "; hftrain speaks the TCPStore protocol of torch 1.13: start it with torchrun of torch 1.13, "
                         "or with hftrain's own launcher (hftrain train --nproc-per-node N)");
  }
  return client;
}

TorchStoreClient::TorchStoreClient(int fd, std::string host, int port, int restart, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), fd_(fd), host_(std::move(host)), port_(port), restart_(restart) {}

TorchStoreClient::~TorchStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

c10::intrusive_ptr<c10d::Store> TorchStoreClient::clone() {
  std::string error;
  auto copy = connect(host_, port_, restart_, timeout_, error);
  if (!copy)
    throw RuntimeFailure("torchrun's agent store at " + host_ + ":" + std::to_string(port_) +
                         ": a second connection failed: " + error);
  return copy;
}

std::string TorchStoreClient::exchange(const Request& request, Reply reply, const std::string& what,
                                       std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string head = "torchrun's agent store at " + host_ + ":" + std::to_string(port_) + ": " + what + ": ";
  if (broken_) throw RuntimeFailure(head + "the connection was lost earlier");
  if (!tcp_send_all(fd_, request.bytes())) {
    broken_ = true;
    throw RuntimeFailure(head + "connection lost (" + std::strerror(errno) + "; the torchrun agent probably exited)");
  }
  const auto deadline = Clock::now() + timeout;
  std::string in, value;
  for (;;) {
    std::size_t used = 0;
    if (tcpstore_wire::parse_reply(reply, in, value, used)) {
      if (used != in.size()) {
        broken_ = true;
        throw RuntimeFailure(head + "the store sent more than one reply (not torch 1.13's TCPStore protocol)");
      }
      return value;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (timeout.count() > 0 && left.count() <= 0) {
      broken_ = true;
      throw RuntimeFailure(head + "no answer within " + seconds_text(timeout));
    }
    const auto wait = timeout.count() > 0 ? std::min(left, std::chrono::milliseconds(1000)) : std::chrono::milliseconds(1000);
    if (tcp_read_some(fd_, in, wait) < 0) {
      broken_ = true;
      throw RuntimeFailure(head + "the store closed the connection (the torchrun agent exited or refused the query)");
    }
  }
}

void TorchStoreClient::wait_for(const std::vector<std::string>& wire_keys, const std::string& what,
                                std::chrono::milliseconds timeout) {
  Request request(Query::kWait);
  request.count(wire_keys.size());
  for (const auto& k : wire_keys) request.text(k);
  const std::string answer = exchange(request, Reply::kByte, what, timeout);
  if (answer != std::to_string(tcpstore_wire::kStopWaiting))
    throw RuntimeFailure("torchrun's agent store at " + host_ + ":" + std::to_string(port_) + ": " + what +
                         ": unexpected answer " + answer + " to WAIT");
}

void TorchStoreClient::set(const std::string& k, const std::vector<uint8_t>& value) {
  exchange(Request(Query::kSet).text(key(k)).text(to_text(value)), Reply::kNone, "set " + k);
}

std::vector<uint8_t> TorchStoreClient::compareSet(const std::string& k, const std::vector<uint8_t>& expected,
                                                  const std::vector<uint8_t>& desired) {
  return to_bytes(exchange(Request(Query::kCompareSet).text(key(k)).text(to_text(expected)).text(to_text(desired)),
                           Reply::kText, "compare-set " + k));
}

std::vector<uint8_t> TorchStoreClient::get(const std::string& k) {
  // The store answers GET only for a key it has (torch's client waits first, as here).
  wait_for({key(k)}, "get " + k, timeout_);
  return to_bytes(exchange(Request(Query::kGet).text(key(k)), Reply::kText, "get " + k));
}

int64_t TorchStoreClient::add(const std::string& k, int64_t value) {
  return std::stoll(exchange(Request(Query::kAdd).text(key(k)).number(value), Reply::kNumber, "add " + k));
}

bool TorchStoreClient::deleteKey(const std::string& k) {
  return exchange(Request(Query::kDeleteKey).text(key(k)), Reply::kNumber, "delete " + k) == "1";
}

bool TorchStoreClient::check(const std::vector<std::string>& keys) {
  Request request(Query::kCheck);
  request.count(keys.size());
  for (const auto& k : keys) request.text(key(k));
  return exchange(request, Reply::kByte, "check") == std::to_string(tcpstore_wire::kReady);
}

int64_t TorchStoreClient::getNumKeys() {
  return std::stoll(exchange(Request(Query::kGetNumKeys), Reply::kNumber, "count keys"));
}

void TorchStoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TorchStoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> wire_keys;
  for (const auto& k : keys) wire_keys.push_back(key(k));
  wait_for(wire_keys, "wait for " + (keys.empty() ? std::string("nothing") : keys[0]), timeout);
}

}  // namespace hftrain
