// The background batch prefetcher yields exactly the loader's batches (order, values, resume skip,
// every epoch, epochs the worker ran on into, slow and fast consumers) and passes a data error on after
// the batches that preceded it.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "data/batch_prefetcher.h"

using namespace hftrain;

namespace {

// Example i has the single feature i and label i % 3; get(fail_at) throws.
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Example get(int64_t index) const override {
    if (index == fail_at_) throw std::runtime_error("row " + std::to_string(index) + " is broken");
    Example e;
    e.features = {static_cast<float>(index)};
    e.label = index % 3;
    return e;
  }

 private:
  int64_t n_, fail_at_;
};

std::vector<std::vector<float>> drain(BatchPrefetcher& p, std::chrono::microseconds pause = {}) {
  std::vector<std::vector<float>> out;
  Batch b;
  while (p.next(b)) {
    if (pause.count() > 0) std::this_thread::sleep_for(pause);  // a step that takes a while
    auto f = b.features.reshape({-1}).contiguous();
    out.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  }
  return out;
}

}  // namespace

TEST_CASE("prefetched batches equal the synchronous loader's, with resume skips", "[unit][prefetch]") {
  auto data = std::make_shared<CountingDataset>(50);
  DataLoader a(data, TaskKind::kClassification, 4, /*shuffle=*/true, 7, false), b(data, TaskKind::kClassification, 4, true, 7, false);
  BatchPrefetcher sync(a, 0, 5), ahead(b, 2, 5);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const int64_t skip = epoch == 1 ? 5 : 0;  // batches
    sync.start_epoch(epoch, skip * 4);
    ahead.start_epoch(epoch, skip * 4);
    const auto expected = drain(sync), got = drain(ahead);
    CHECK(expected.size() == static_cast<std::size_t>(13 - skip));  // ceil(50 / 4) batches
    CHECK(got == expected);
  }
  // An epoch abandoned half way (stop at max_steps) and a new one started: no stale batches leak in.
  ahead.start_epoch(0);
  Batch first;
  REQUIRE(ahead.next(first));
  ahead.start_epoch(4);
  sync.start_epoch(4);
  CHECK(drain(ahead) == drain(sync));
}

TEST_CASE("the worker runs on into the next epochs with the loader's batches, then stops", "[unit][prefetch]") {
  auto data = std::make_shared<CountingDataset>(23);
  DataLoader a(data, TaskKind::kClassification, 3, /*shuffle=*/true, 11, /*drop_last=*/true),
      b(data, TaskKind::kClassification, 3, true, 11, true);
  const int64_t epochs = 4;
  BatchPrefetcher sync(a, 0, epochs), ahead(b, 1, epochs);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    sync.start_epoch(epoch);
    ahead.start_epoch(epoch);
    // Alternate a slow consumer (the worker waits on a full queue) and a fast one (it runs dry).
    const auto pause = std::chrono::microseconds(epoch % 2 == 0 ? 2000 : 0);
    const auto expected = drain(sync), got = drain(ahead, pause);
    CHECK(expected.size() == 7u);  // floor(23 / 3) with drop_last
    CHECK(got == expected);
  }
  Batch extra;
  CHECK_FALSE(ahead.next(extra));  // the last epoch is over and stays over
  // An epoch past the planned ones is still served (the worker is started afresh for it).
  sync.start_epoch(epochs);
  ahead.start_epoch(epochs);
  CHECK(drain(ahead) == drain(sync));
}

TEST_CASE("a data error reaches the training loop after the batches before it", "[unit][prefetch]") {
  auto data = std::make_shared<CountingDataset>(20, /*fail_at=*/9);
  DataLoader loader(data, TaskKind::kClassification, 4, /*shuffle=*/false, 0, false);
  BatchPrefetcher ahead(loader, 3, 1);
  ahead.start_epoch(0);
  Batch b;
  REQUIRE(ahead.next(b));  // rows 0-3
  REQUIRE(ahead.next(b));  // rows 4-7
  CHECK(b.features.reshape({-1})[0].item<float>() == 4.0f);
  CHECK_THROWS_WITH(ahead.next(b), Catch::Contains("row 9 is broken"));
}
