// AioFile (offload/aio_file.h): data written through overlapping asynchronous requests (several per
// buffer, more than the queue holds) reads back bit for bit, on the temporary directory's filesystem and
// on tmpfs (which older kernels open buffered); failures name the file, operation and offset.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "offload/aio_file.h"
#include "util/error.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

void fill_random(AlignedBuffer& b, unsigned seed) {
  std::mt19937 gen(seed);
  auto* p = static_cast<uint32_t*>(b.data());
  for (int64_t i = 0; i < b.size() / 4; ++i) p[i] = gen();
}

void round_trip(const std::string& path) {
  AioOptions options;
  options.block_size = 16384;  // each 192 KiB buffer is 12 requests, more than the queue holds
  options.queue_depth = 4;
  const int64_t part = 192 * 1024;
  AioFile file(path, 3 * part, options);
  std::vector<std::unique_ptr<AlignedBuffer>> out, in;
  std::vector<AioFile::Ticket> tickets;
  for (int k = 0; k < 3; ++k) {
    out.push_back(std::make_unique<AlignedBuffer>(part));
    fill_random(*out.back(), 7 + k);
    tickets.push_back(file.submit_write(out.back()->data(), part, k * part));
  }
  for (auto t : tickets) file.wait(t);
  tickets.clear();
  for (int k = 2; k >= 0; --k) {  // read back in another order, all in flight together
    in.push_back(std::make_unique<AlignedBuffer>(part));
    tickets.push_back(file.submit_read(in.back()->data(), part, k * part));
  }
  file.wait_all();
  for (int k = 0; k < 3; ++k) CHECK(std::memcmp(out[k]->data(), in[2 - k]->data(), part) == 0);
  CHECK(fs::file_size(path) == static_cast<uintmax_t>(3 * part));
}

}  // namespace

TEST_CASE("AioFile writes and reads back bit for bit, direct or buffered", "[unit][offload]") {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_unit_aio_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  round_trip((dir / "swap.bin").string());
  if (fs::is_directory("/dev/shm")) {  // tmpfs: O_DIRECT refused before Linux 6.6, taken since
    const std::string shm = "/dev/shm/hftrain_unit_aio_swap.bin";
    round_trip(shm);
    fs::remove(shm);
  }
  fs::remove_all(dir);
}

TEST_CASE("AioFile names the file, operation and offset of a failure", "[unit][offload]") {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_unit_aio_errors_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "swap.bin").string();
  AioFile file(path, 8192, AioOptions{});
  AlignedBuffer b(16384);
  // Past the end of the file: a short read.
  auto t = file.submit_read(b.data(), 16384, 0);
  CHECK_THROWS_WITH(file.wait(t), Catch::Contains("swap file '" + path + "': read of 16384 bytes at offset 0 failed: short read"));
  CHECK_THROWS_WITH(file.submit_write(b.data(), 100, 0), Catch::Contains("unaligned request"));
  AioOptions odd;
  odd.block_size = 1000;
  CHECK_THROWS_AS(AioFile(path, 4096, odd), ConfigError);
  CHECK_THROWS_WITH(AioFile((dir / "missing" / "x.bin").string(), 4096, AioOptions{}),
                    Catch::Contains("cannot create swap file '" + (dir / "missing" / "x.bin").string() + "'"));
  fs::remove_all(dir);
}
