// File-descriptor writes and errno texts (see fd_io.h).
#include "util/fd_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hftrain {

bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(size, std::size_t{1} << 30));  // some systems refuse > 2 GiB
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string errno_text(int err) { return std::strerror(err); }

std::string errno_text() { return std::strerror(errno); }

}  // namespace hftrain
