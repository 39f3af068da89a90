// util/parallel.h: hftrain's kernels split their work over LibTorch's intra-op threads. (at::parallel_for,
// called from a file compiled without OpenMP, silently ran every range on the calling thread.)
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/attention.h"
#include "models/fused_attention.h"
#include "util/parallel.h"
#include "util/threads.h"

using namespace hftrain;

namespace {

// Sets LibTorch's and hftrain's thread count for a scope.
struct ThreadCount {
  int saved = at::get_num_threads();
  explicit ThreadCount(int n) {
    at::set_num_threads(n);
    sync_parallel_threads();
  }
  ~ThreadCount() {
    at::set_num_threads(saved);
    sync_parallel_threads();
  }
};

}  // namespace

TEST_CASE("parallel_range runs its pieces on as many threads as LibTorch is set to, every item once",
          "[unit][threads]") {
  ThreadCount two(2);
  REQUIRE(parallel_threads() == 2);
  std::vector<int> seen(1000, 0);
  std::set<std::thread::id> threads;
  std::mutex m;
  parallel_range(0, 1000, 10, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    threads.insert(std::this_thread::get_id());
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<std::size_t>(i)];
  });
  CHECK(threads.size() == 2);
  for (int count : seen) REQUIRE(count == 1);
}

TEST_CASE("parallel_range stays on the calling thread for one thread, a range within the grain, or a nested call",
          "[unit][threads]") {
  const auto caller = std::this_thread::get_id();
  auto pieces_and_threads = [&](int64_t n, int64_t grain) {
    std::set<std::thread::id> threads;
    int pieces = 0;
    std::mutex m;
    parallel_range(0, n, grain, [&](int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(m);
      ++pieces;
      threads.insert(std::this_thread::get_id());
    });
    return std::make_pair(pieces, threads);
  };
  {
    ThreadCount one(1);
    const auto r = pieces_and_threads(1000, 1);
    CHECK(r.first == 1);
    CHECK(r.second == std::set<std::thread::id>{caller});
  }
  ThreadCount two(2);
  const auto small = pieces_and_threads(64, 64);
  CHECK(small.first == 1);
  CHECK(small.second == std::set<std::thread::id>{caller});
  // Inside a piece, an inner range runs whole on that piece's thread.
  std::mutex m;
  std::vector<std::pair<std::thread::id, std::set<std::thread::id>>> inner;
  parallel_range(0, 2, 1, [&](int64_t, int64_t) {
    const auto r = pieces_and_threads(1000, 1);
    std::lock_guard<std::mutex> lock(m);
    CHECK(r.first == 1);
    inner.emplace_back(std::this_thread::get_id(), r.second);
  });
  REQUIRE(inner.size() == 2);
  for (const auto& [outer, threads] : inner) CHECK(threads == std::set<std::thread::id>{outer});
}

TEST_CASE("parallel_range rethrows a piece's exception after every piece has finished", "[unit][threads]") {
  ThreadCount two(2);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(parallel_range(0, 2, 1,
                                   [&](int64_t b, int64_t) {
                                     if (b == 0) throw std::runtime_error("piece 0 failed");
                                     finished.fetch_add(1);
                                   }),
                    "piece 0 failed");
  CHECK(finished.load() == 1);
}

TEST_CASE("the fused attention gives the same bits on two threads as on one",
          "[unit][threads][kernels]") {
  torch::manual_seed(3);
  const int64_t B = 3, H = 4, T = 37, d = 24;
  auto q = torch::randn({B, H, T, d}), k = torch::randn({B, H, T, d}), v = torch::randn({B, H, T, d});
  kernels::AttentionShape s;
  s.batch = B, s.heads = H, s.queries = T, s.keys = T, s.dim = d, s.causal = true, s.scale = 0.2f;
  auto run = [&](int threads) {
    ThreadCount count(threads);
    auto o = torch::empty({B, H, T, d}), lse = torch::empty({B, H, T});
    kernels::attention_forward(s, head_layout(q), head_layout(k), head_layout(v), head_layout(o), lse.data_ptr<float>());
    return o;
  };
  CHECK(torch::equal(run(1), run(2)));
}
