// Linux AIO (libaio) on one file (see aio_file.h).
#include "offload/aio_file.h"

#include <fcntl.h>
#include <libaio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "util/fault_injection.h"
#include "util/error.h"
#include "util/fd_io.h"

namespace hftrain {
namespace {

io_context_t as_context(void* p) { return static_cast<io_context_t>(p); }

// One request: its iocb, the ticket it belongs to, and what to name in an error.
struct Request {
  struct iocb cb;
  uint64_t ticket;
  bool write;
  int64_t offset, bytes;
};

}  // namespace

int64_t round_up_to_alignment(int64_t bytes) {
  return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
}

AlignedBuffer::AlignedBuffer(int64_t size) : size_(round_up_to_alignment(size)) {
  if (size_ > 0 && ::posix_memalign(&data_, kDirectIoAlignment, static_cast<std::size_t>(size_)) != 0)
    throw RuntimeFailure("cannot allocate an aligned I/O buffer of " + std::to_string(size_) + " bytes");
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AioFile::AioFile(std::string path, int64_t size, const AioOptions& options) : path_(std::move(path)), options_(options) {
  if (options_.block_size <= 0 || options_.block_size % kDirectIoAlignment != 0)
    throw ConfigError("aio.block_size must be a positive multiple of " + std::to_string(kDirectIoAlignment) + " (got " +
                      std::to_string(options_.block_size) + ")");
  if (options_.queue_depth < 1) throw ConfigError("aio.queue_depth must be at least 1");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0 && errno == EINVAL) {  // the filesystem does not do direct I/O (tmpfs)
    direct_ = false;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  if (fd_ < 0) throw RuntimeFailure("cannot create swap file '" + path_ + "': " + errno_text(errno));
  if (size > 0) {
    const int err = ::posix_fallocate(fd_, 0, size);
    if (err != 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
      throw RuntimeFailure("cannot reserve " + std::to_string(size) + " bytes for swap file '" + path_ +
                           "': " + errno_text(err));
    }
  }
  io_context_t ctx = nullptr;
  const int err = io_setup(options_.queue_depth, &ctx);
  if (err != 0) {
    ::close(fd_);
    throw RuntimeFailure("io_setup(" + std::to_string(options_.queue_depth) + ") for '" + path_ + "': " + errno_text(-err));
  }
  context_ = ctx;
}

AioFile::~AioFile() {
  try {
    wait_all();
  } catch (const std::exception&) {  // the error was reported to whoever waited; nothing to add here
  }
  if (context_) io_destroy(as_context(context_));
  if (fd_ >= 0) ::close(fd_);
}

AioFile::Ticket AioFile::submit_write(const void* buffer, int64_t bytes, int64_t offset) {
  return submit(true, const_cast<void*>(buffer), bytes, offset);
}

AioFile::Ticket AioFile::submit_read(void* buffer, int64_t bytes, int64_t offset) {
  return submit(false, buffer, bytes, offset);
}

AioFile::Ticket AioFile::submit(bool write, void* buffer, int64_t bytes, int64_t offset) {
  if (offset % kDirectIoAlignment != 0 || bytes % kDirectIoAlignment != 0 ||
      reinterpret_cast<uintptr_t>(buffer) % kDirectIoAlignment != 0)
    throw RuntimeFailure("swap file '" + path_ + "': unaligned request (" + std::to_string(bytes) + " bytes at " +
                         std::to_string(offset) + ")");
  const Ticket ticket = next_ticket_++;
  int parts = 0;
  for (int64_t done = 0; done < bytes; done += options_.block_size) {
    const int64_t n = std::min(options_.block_size, bytes - done);
    while (in_flight_ >= options_.queue_depth) reap(1);
    auto* r = new Request{};
    r->ticket = ticket;
    r->write = write;
    r->offset = offset + done;
    r->bytes = n;
    char* at = static_cast<char*>(buffer) + done;
    if (write) io_prep_pwrite(&r->cb, fd_, at, static_cast<std::size_t>(n), r->offset);
    else io_prep_pread(&r->cb, fd_, at, static_cast<std::size_t>(n), r->offset);
    r->cb.data = r;
    struct iocb* list[1] = {&r->cb};
    const int got = io_submit(as_context(context_), 1, list);
    if (got != 1) {
      delete r;
      throw RuntimeFailure("swap file '" + path_ + "': cannot submit a " + (write ? "write" : "read") + " of " +
                           std::to_string(n) + " bytes at offset " + std::to_string(offset + done) + ": " +
                           errno_text(got < 0 ? -got : EAGAIN));
    }
    ++in_flight_;
    ++parts;
    if (!options_.overlap_events) reap(1);
  }
  outstanding_[ticket] += parts;
  return ticket;
}

void AioFile::reap(int min_events) {
  std::vector<struct io_event> events(static_cast<std::size_t>(options_.queue_depth));
  int n;
  do {
    n = io_getevents(as_context(context_), min_events, options_.queue_depth, events.data(), nullptr);
  } while (n == -EINTR);
  if (n < 0) throw RuntimeFailure("swap file '" + path_ + "': io_getevents: " + errno_text(-n));
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Request> r(static_cast<Request*>(events[i].data));
    --in_flight_;
    const long res = static_cast<long>(events[i].res);
    const int injected = fault::aio_request();
    std::string problem;
    if (injected != 0) problem = errno_text(injected) + " (injected)";
    else if (res < 0) problem = errno_text(static_cast<int>(-res));
    else if (res != r->bytes) problem = "short " + std::string(r->write ? "write" : "read") + " of " + std::to_string(res) + " bytes";
    if (!problem.empty() && !failed_.count(r->ticket))
      failed_[r->ticket] = "swap file '" + path_ + "': " + (r->write ? "write" : "read") + " of " +
                           std::to_string(r->bytes) + " bytes at offset " + std::to_string(r->offset) + " failed: " + problem;
    --outstanding_[r->ticket];
  }
}

void AioFile::wait(Ticket ticket) {
  auto it = outstanding_.find(ticket);
  if (it == outstanding_.end()) throw RuntimeFailure("swap file '" + path_ + "': unknown I/O ticket");
  while (it->second > 0) reap(1);
  outstanding_.erase(it);
  auto failed = failed_.find(ticket);
  if (failed != failed_.end()) {
    const std::string message = failed->second;
    failed_.erase(failed);
    throw RuntimeFailure(message);
  }
}

void AioFile::wait_all() {
  while (!outstanding_.empty()) wait(outstanding_.begin()->first);
}

}  // namespace hftrain
