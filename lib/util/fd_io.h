// Writing to a file descriptor and naming an errno: shared by the code that talks to files, pipes and
// sockets through POSIX calls.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hftrain {

// Writes all `size` bytes, continuing after partial writes and EINTR. False on an error, with errno telling
// which (EIO for a write that wrote nothing); the descriptor is left open.
bool write_all(int fd, const void* data, std::size_t size);
inline bool write_all(int fd, std::string_view text) { return write_all(fd, text.data(), text.size()); }

// strerror's text for `err`, or for the current errno.
std::string errno_text(int err);
std::string errno_text();

}  // namespace hftrain
