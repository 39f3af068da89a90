// The rendezvous store's server and client (see store.h). Wire format, both directions: one byte (the
// operation in a request, 0 = ok / 1 = error in a reply), a uint32 argument count, then each argument
// as a uint32 length and its bytes (host byte order: every worker runs the same binary).
#include "distributed/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "distributed/tcp_socket.h"
#include "log/logger.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace {

enum Op : uint8_t { kHello = 1, kSet, kGet, kAdd, kCheck, kWait, kDelete, kNumKeys, kCompareSet };
constexpr std::size_t kMaxUnauthenticated = 4096;    // a stranger cannot make the server buffer more
constexpr std::size_t kMaxMessage = std::size_t(1) << 30;
using Clock = std::chrono::steady_clock;

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

std::string frame(uint8_t head, const std::vector<std::string>& args) {
  std::string out(1, static_cast<char>(head));
  put_u32(out, static_cast<uint32_t>(args.size()));
  for (const auto& a : args) {
    put_u32(out, static_cast<uint32_t>(a.size()));
    out += a;
  }
  return out;
}

// Parses one complete frame at the start of `buf`: 1 = parsed (`used` bytes), 0 = incomplete, -1 = malformed.
int parse_frame(const std::string& buf, std::size_t limit, uint8_t& head, std::vector<std::string>& args,
                std::size_t& used) {
  if (buf.size() < 5) return buf.size() > limit ? -1 : 0;
  uint32_t n = 0;
  std::memcpy(&n, buf.data() + 1, 4);
  if (n > 65536) return -1;
  std::size_t at = 5;
  args.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (buf.size() < at + 4) return at + 4 > limit ? -1 : 0;
    uint32_t len = 0;
    std::memcpy(&len, buf.data() + at, 4);
    at += 4;
    if (at + len > limit) return -1;
    if (buf.size() < at + len) return 0;
    args.emplace_back(buf.data() + at, len);
    at += len;
  }
  head = static_cast<uint8_t>(buf[0]);
  used = at;
  return 1;
}

std::string peer_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unknown peer";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "an unknown peer";
  return std::string(host) + ":" + serv;
}

// Constant-time comparison, so the token cannot be guessed byte by byte from reply times.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}


}  // namespace

struct StoreServer::Conn {
  int fd = -1;
  std::string peer, in;
  bool authenticated = false;
};

// A get() or wait() whose keys are not all there yet.
struct StoreServer::Waiter {
  int fd = -1;
  uint8_t op = 0;
  std::vector<std::string> keys;
};

StoreServer::StoreServer(const std::string& host, int port, std::string token) : token_(std::move(token)), port_(port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  const std::string where = host + ":" + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    throw RuntimeFailure("rendezvous: cannot resolve the master address '" + host + "': " + ::gai_strerror(rc));
  std::string error;
  for (addrinfo* ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      char numeric[NI_MAXHOST], serv[NI_MAXSERV];
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0 &&
          ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, numeric, sizeof numeric, serv, sizeof serv,
                        NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        address_ = numeric;
        port_ = std::atoi(serv);  // the port the system chose when `port` was 0
      }
      listen_fd_ = fd;
    } else {
      const int e = errno;
      error = e == EADDRINUSE     ? "port " + std::to_string(port) + " is in use (another job? choose another --master-port)"
              : e == EADDRNOTAVAIL ? "'" + host + "' is not an address of this machine (node 0 must be the machine at the master address)"
                                  : std::strerror(e);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) throw RuntimeFailure("rendezvous: rank 0 cannot listen at " + where + ": " + error);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw RuntimeFailure("rendezvous: cannot create a pipe: " + std::string(std::strerror(errno)));
  }
  thread_ = std::thread([this] { loop(); });
}

StoreServer::~StoreServer() {
  const char c = 'q';
  ssize_t ignored = ::write(wake_[1], &c, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  for (auto& kv : conns_) {
    ::close(kv.first);
    delete kv.second;
  }
  for (auto* w : waiters_) delete w;
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void StoreServer::loop() {
  for (;;) {
    std::vector<pollfd> pfds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (auto& kv : conns_) pfds.push_back({kv.first, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (pfds[0].revents) return;
    if (pfds[1].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        auto* c = new Conn;
        c->fd = fd;
        c->peer = peer_of(fd);
        conns_[fd] = c;
      }
    }
    for (std::size_t i = 2; i < pfds.size(); ++i)
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        auto it = conns_.find(pfds[i].fd);
        if (it != conns_.end()) handle_readable(*it->second);
      }
  }
}

void StoreServer::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    if ((*w)->fd == fd) {
      delete *w;
      w = waiters_.erase(w);
    } else {
      ++w;
    }
  }
  ::close(fd);
  delete it->second;
  conns_.erase(it);
}

void StoreServer::refuse(Conn& c, const std::string& why) {
  ++refused_;
  log_warning("rendezvous store: refused a connection from " + c.peer + ": " + why + " (the job runs on)");
  tcp_send_all(c.fd, frame(1, {why}));
  close_conn(c.fd);
}

void StoreServer::handle_readable(Conn& c) {
  const int fd = c.fd;
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (n < 0 && errno == EINTR) return;
    close_conn(fd);
    return;
  }
  c.in.append(buf, static_cast<std::size_t>(n));
  for (;;) {
    uint8_t op = 0;
    std::vector<std::string> args;
    std::size_t used = 0;
    const int r = parse_frame(c.in, c.authenticated ? kMaxMessage : kMaxUnauthenticated, op, args, used);
    if (r < 0) {
      if (!c.authenticated) refuse(c, "not an hftrain rendezvous message");
      else close_conn(fd);
      return;
    }
    if (r == 0) return;
    c.in.erase(0, used);
    if (!c.authenticated) {
      if (op != kHello || args.size() != 2) {
        refuse(c, "not an hftrain worker (no job token presented)");
        return;
      }
      if (!token_.empty() && !same_secret(args[0], token_)) {
        refuse(c, "wrong job token (HFTRAIN_RDZV_TOKEN) from '" + args[1].substr(0, 200) + "'");
        return;
      }
      c.authenticated = true;
      if (!tcp_send_all(fd, frame(0, {}))) return close_conn(fd);
      continue;
    }
    if (!handle_message(c, op, args)) return close_conn(fd);
    if (!conns_.count(fd)) return;  // closed while waking waiters
  }
}

bool StoreServer::handle_message(Conn& c, uint8_t op, std::vector<std::string>& args) {
  auto reply = [&](const std::vector<std::string>& out) { return tcp_send_all(c.fd, frame(0, out)); };
  auto need = [&](std::size_t n) { return args.size() == n; };
  switch (op) {
    case kSet:
      if (!need(2)) return false;
      data_[args[0]] = args[1];
      if (!reply({})) return false;
      wake_waiters();
      return true;
    case kGet:
    case kWait: {
      bool all = true;
      for (const auto& k : args) all = all && data_.count(k) > 0;
      if (op == kGet && !need(1)) return false;
      if (all) return reply(op == kGet ? std::vector<std::string>{data_[args[0]]} : std::vector<std::string>{});
      waiters_.push_back(new Waiter{c.fd, op, args});
      return true;
    }
    case kAdd: {
      if (!need(2)) return false;
      int64_t v = 0;
      try {
        v = data_.count(args[0]) ? std::stoll(data_[args[0]]) : 0;
        v += std::stoll(args[1]);
      } catch (const std::exception&) {
        return false;
      }
      data_[args[0]] = std::to_string(v);
      if (!reply({std::to_string(v)})) return false;
      wake_waiters();
      return true;
    }
    case kCheck: {
      bool all = true;
      for (const auto& k : args) all = all && data_.count(k) > 0;
      return reply({all ? "1" : "0"});
    }
    case kDelete:
      if (!need(1)) return false;
      return reply({data_.erase(args[0]) ? "1" : "0"});
    case kNumKeys:
      return reply({std::to_string(data_.size())});
    case kCompareSet: {  // c10d's semantics: set when the current value (absent = "") equals `expected`
      if (!need(3)) return false;
      auto it = data_.find(args[0]);
      if (it == data_.end()) {
        if (!args[1].empty()) return reply({args[1]});
        data_[args[0]] = args[2];
      } else if (it->second == args[1]) {
        it->second = args[2];
      } else {
        return reply({it->second});
      }
      if (!reply({args[2]})) return false;
      wake_waiters();
      return true;
    }
    default:
      return false;
  }
}

void StoreServer::wake_waiters() {
  std::vector<int> dead;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter* w = *it;
    bool all = true;
    for (const auto& k : w->keys) all = all && data_.count(k) > 0;
    if (!all) {
      ++it;
      continue;
    }
    const auto out = w->op == kGet ? std::vector<std::string>{data_[w->keys[0]]} : std::vector<std::string>{};
    if (!tcp_send_all(w->fd, frame(0, out))) dead.push_back(w->fd);
    delete w;
    it = waiters_.erase(it);
  }
  for (int fd : dead) close_conn(fd);
}

c10::intrusive_ptr<StoreClient> StoreClient::connect(const std::string& host, int port, const std::string& token,
                                                     const std::string& who, std::chrono::milliseconds timeout,
                                                     std::string& error) {
  const std::string where = host + ":" + std::to_string(port);
  const int fd = tcp_connect(host, port, error);
  if (fd < 0) return {};
  auto client = c10::make_intrusive<StoreClient>(fd, where, timeout);
  client->host_ = host;
  client->port_ = port;
  client->token_ = token;
  client->who_ = who;
  try {
    client->call(kHello, {token, who}, "joining");
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(std::string(e.what()) + "; every node of a job needs the same HFTRAIN_RDZV_TOKEN");
  }
  return client;
}

StoreClient::StoreClient(int fd, std::string where, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), fd_(fd), where_(std::move(where)) {}

c10::intrusive_ptr<c10d::Store> StoreClient::clone() {
  std::string error;
  auto copy = connect(host_, port_, token_, who_, timeout_, error);
  if (!copy) throw RuntimeFailure("rendezvous store at " + where_ + ": a second connection failed: " + error);
  return copy;
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> StoreClient::call(uint8_t op, const std::vector<std::string>& args, const std::string& what,
                                           std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string head = "rendezvous store at " + where_ + ": " + what + ": ";
  if (broken_) throw RuntimeFailure(head + "the connection was lost earlier");
  if (!tcp_send_all(fd_, frame(op, args))) {
    broken_ = true;
    throw RuntimeFailure(head + "connection lost (" + std::strerror(errno) + "; rank 0 probably exited, see its error)");
  }
  const auto deadline = Clock::now() + timeout;
  std::string in;
  for (;;) {
    uint8_t status = 0;
    std::vector<std::string> out;
    std::size_t used = 0;
    if (parse_frame(in, kMaxMessage, status, out, used) == 1) {
      if (status != 0) {
        broken_ = true;
        throw RuntimeFailure(head + "refused: " + (out.empty() ? std::string("no reason given") : out[0]));
      }
      return out;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (timeout.count() > 0 && left <= 0) {
      broken_ = true;
      throw RuntimeFailure(head + "no answer within " + std::to_string(timeout.count() / 1000.0).substr(0, 6) + " s");
    }
    const auto wait = std::chrono::milliseconds(timeout.count() > 0 ? std::min<int64_t>(left, 1000) : 1000);
    if (tcp_read_some(fd_, in, wait) < 0) {
      broken_ = true;
      throw RuntimeFailure(head + "the store closed the connection (rank 0 probably exited; see its error)");
    }
  }
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  call(kSet, {key, to_text(value)}, "set " + key);
}

std::vector<uint8_t> StoreClient::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  return to_bytes(call(kCompareSet, {key, to_text(expected), to_text(desired)}, "compare-set " + key).at(0));
}

std::vector<uint8_t> StoreClient::get(const std::string& key) { return to_bytes(get_text(key)); }

int64_t StoreClient::add(const std::string& key, int64_t value) {
  return std::stoll(call(kAdd, {key, std::to_string(value)}, "add " + key).at(0));
}

bool StoreClient::deleteKey(const std::string& key) { return call(kDelete, {key}, "delete " + key).at(0) == "1"; }

bool StoreClient::check(const std::vector<std::string>& keys) { return call(kCheck, keys, "check").at(0) == "1"; }

int64_t StoreClient::getNumKeys() { return std::stoll(call(kNumKeys, {}, "count keys").at(0)); }

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  call(kWait, keys, "wait for " + (keys.empty() ? std::string("nothing") : keys[0]), timeout);
}

void StoreClient::set_text(const std::string& key, const std::string& value) { call(kSet, {key, value}, "set " + key); }

std::string StoreClient::get_text(const std::string& key) { return call(kGet, {key}, "get " + key).at(0); }

}  // namespace hftrain
