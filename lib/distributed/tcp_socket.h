// TCP plumbing shared by the rendezvous store's server and its clients (store.h, torch_store.h):
// connecting to host:port, sending a whole buffer, and reading what has arrived within a bound.
#pragma once

#include <chrono>
#include <string>

namespace hftrain {

// A connected socket to host:port (close-on-exec, TCP_NODELAY), trying each address the name resolves
// to; -1 with `error` set ("Connection refused", "cannot resolve 'x': ...") when none answers.
int tcp_connect(const std::string& host, int port, std::string& error);

// Sends every byte (retrying on EINTR, never raising SIGPIPE); false when the connection is gone.
bool tcp_send_all(int fd, const std::string& bytes);

// Appends what arrives on `fd` within `wait` to `in`: 1 read something, 0 nothing arrived, -1 the
// peer closed the connection or it failed.
int tcp_read_some(int fd, std::string& in, std::chrono::milliseconds wait);

}  // namespace hftrain
