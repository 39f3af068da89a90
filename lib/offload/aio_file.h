// Asynchronous direct I/O on one file, the transport of NVMe offload (DeepSpeed's aio handle; facts: ZeRO-
// Infinity's swap files are read and written with Linux AIO, O_DIRECT, 4 KiB-aligned buffers). Reads and
// writes of aligned buffers at aligned offsets are cut into `block_size` requests, submitted to the kernel
// (libaio, at most `queue_depth` in flight) and complete in the background while the caller computes;
// wait() collects one of them. O_DIRECT bypasses the page cache where the filesystem allows it; where it
// does not (tmpfs, some overlay filesystems) the file is opened buffered and direct() says so, so the
// caller can print it -- never a silent downgrade. Errors name the file, the operation and the offset.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace hftrain {

// DeepSpeed's `aio` section (same names and defaults).
struct AioOptions {
  int64_t block_size = 1 << 20;  // bytes per request
  int queue_depth = 8;           // requests in flight at most
  bool overlap_events = true;    // submit the next requests while earlier ones complete (false: one at a time)
};

// The alignment O_DIRECT needs for buffers, offsets and lengths on Linux's common block devices.
constexpr int64_t kDirectIoAlignment = 4096;
int64_t round_up_to_alignment(int64_t bytes);

// Memory aligned for O_DIRECT (posix_memalign), `size` rounded up to the alignment.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(int64_t size);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  int64_t size_ = 0;
};

class AioFile {
 public:
  using Ticket = uint64_t;
  // Creates (or truncates) `path` and reserves `size` bytes for it (posix_fallocate, so a full filesystem
  // is found here rather than mid-step). Throws RuntimeFailure naming the path.
  AioFile(std::string path, int64_t size, const AioOptions& options);
  ~AioFile();
  AioFile(const AioFile&) = delete;
  AioFile& operator=(const AioFile&) = delete;

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }  // false: O_DIRECT was refused by the filesystem

  // `bytes` from `buffer` to `offset` (write) or back (read); offset, bytes and buffer aligned. The
  // buffer must stay alive and untouched until wait() returns for the ticket.
  Ticket submit_write(const void* buffer, int64_t bytes, int64_t offset);
  Ticket submit_read(void* buffer, int64_t bytes, int64_t offset);
  // Blocks until every request of `ticket` has completed; a failed request throws RuntimeFailure
  // naming the file, the operation, the offset and the error.
  void wait(Ticket ticket);
  void wait_all();

 private:
  Ticket submit(bool write, void* buffer, int64_t bytes, int64_t offset);
  void reap(int min_events);

  std::string path_;
  AioOptions options_;
  int fd_ = -1;
  bool direct_ = true;
  void* context_ = nullptr;  // io_context_t
  Ticket next_ticket_ = 1;
  std::map<Ticket, int> outstanding_;  // ticket -> requests not yet completed
  std::map<Ticket, std::string> failed_;
  int in_flight_ = 0;
};

}  // namespace hftrain
