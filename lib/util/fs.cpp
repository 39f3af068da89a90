// Filesystem helpers (see fs.h).
#include "util/fs.h"

#include <atomic>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/fd_io.h"

namespace hftrain {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeFailure("cannot read '" + path + "': " + errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<char> read_binary_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw RuntimeFailure("cannot read '" + path + "': " + errno_text());
  std::streamsize size = in.tellg();
  in.seekg(0);
  std::vector<char> bytes(static_cast<std::size_t>(size));
  if (size > 0 && !in.read(bytes.data(), size)) throw RuntimeFailure("cannot read '" + path + "': short read");
  return bytes;
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  // Unique per process and call: two writers of one path (e.g. two `hftrain search` processes sharing a
  // study's output_dir) never rename each other's temporary file away; the last rename wins whole.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeFailure("cannot write '" + path + "': " + errno_text());
  if (!write_all(fd, data, size)) {
    std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw RuntimeFailure("cannot write '" + path + "': " + why);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw RuntimeFailure("cannot write '" + path + "': " + why);
  }
  rename_durably(tmp, path);
}

void rename_durably(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw RuntimeFailure("cannot write '" + path + "': " + why);
  }
  fsync_directory(std::filesystem::path(path).parent_path().string());
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

bool directory_is_empty(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return true;
  return std::filesystem::is_empty(dir, ec);
}

}  // namespace hftrain
