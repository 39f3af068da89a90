// The small helpers every layer shares from util/: string predicates (strings.h), whole writes to a file
// descriptor and errno texts (fd_io.h), a tensor's bytes (tensor_bytes.h).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "util/fd_io.h"
#include "util/strings.h"
#include "util/tensor_bytes.h"

using namespace hftrain;

TEST_CASE("starts_with and ends_with compare whole prefixes and suffixes", "[unit][util]") {
  CHECK(starts_with("checkpoint-12", "checkpoint-"));
  CHECK(starts_with("abc", ""));
  CHECK(starts_with("abc", "abc"));
  CHECK_FALSE(starts_with("ab", "abc"));
  CHECK_FALSE(starts_with("xabc", "abc"));
  CHECK(ends_with("eval_loss", "loss"));
  CHECK(ends_with("loss", "loss"));
  CHECK(ends_with("abc", ""));
  CHECK_FALSE(ends_with("oss", "loss"));
  CHECK_FALSE(ends_with("loss_x", "loss"));
}

TEST_CASE("write_all writes every byte through a pipe smaller than the text", "[unit][util]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string text(1 << 20, '\0');  // more than a pipe holds: the writer blocks and writes in pieces
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + i / 251);
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  });
  const bool written = write_all(fds[1], text);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  CHECK(written);
  CHECK(got == text);
}

TEST_CASE("write_all reports an error through errno and errno_text names it", "[unit][util]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[1]);
  errno = 0;
  CHECK_FALSE(write_all(fds[1], "text"));  // a closed descriptor
  CHECK(errno == EBADF);
  CHECK(errno_text() == std::strerror(EBADF));
  CHECK(errno_text(ENOSPC) == std::strerror(ENOSPC));
  ::close(fds[0]);
}

TEST_CASE("tensor_bytes counts a defined tensor's element bytes and 0 for an undefined one", "[unit][util]") {
  CHECK(tensor_bytes(torch::Tensor()) == 0);
  CHECK(tensor_bytes(torch::zeros({3, 5}, torch::kFloat)) == 60);
  CHECK(tensor_bytes(torch::zeros({4}, torch::kBFloat16)) == 8);
}
