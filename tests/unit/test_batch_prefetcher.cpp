// The background batch prefetcher yields exactly the loader's batches (order, values, resume skip,
// every epoch, epochs the worker ran on into, slow and fast consumers) and passes a data error on after
// the batches that preceded it; a batch stage (the GPU pinning) runs once per batch on the worker thread.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "data/batch_placement.h"
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

TEST_CASE("a batch stage runs once on every batch, on the worker thread, before the batch is handed over",
          "[unit][prefetch]") {
  // The trainer's stage pins batches bound for a GPU (pin_stage); here it marks each batch and notes its thread.
  auto data = std::make_shared<CountingDataset>(30);
  for (int depth : {0, 3}) {
    INFO("depth " << depth);
    DataLoader plain(data, TaskKind::kClassification, 4, /*shuffle=*/true, 5, false),
        staged_loader(data, TaskKind::kClassification, 4, true, 5, false);
    std::vector<std::thread::id> threads;
    int staged = 0;
    BatchStage mark = [&](Batch& b) {
      threads.push_back(std::this_thread::get_id());  // the worker alone runs it while the consumer waits
      b.features = b.features + 1000.0f;
      ++staged;
    };
    BatchPrefetcher reference(plain, 0, 2), staged_batches(staged_loader, depth, 2, mark);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      reference.start_epoch(epoch);
      staged_batches.start_epoch(epoch);
      auto expected = drain(reference);
      for (auto& batch : expected)
        for (float& v : batch) v += 1000.0f;
      CHECK(drain(staged_batches) == expected);
    }
    CHECK(staged == 2 * 8);  // ceil(30 / 4) batches per epoch, each staged once
    for (const auto& id : threads) CHECK((id == std::this_thread::get_id()) == (depth == 0));
  }
  // An error of the stage is the batch's: it reaches next() after the batches before it.
  DataLoader loader(data, TaskKind::kClassification, 4, /*shuffle=*/false, 0, false);
  int made = 0;
  BatchPrefetcher failing(loader, 2, 1, [&](Batch&) {
    if (++made == 3) throw std::runtime_error("cannot pin batch 3");
  });
  failing.start_epoch(0);
  Batch b;
  CHECK(failing.next(b));
  CHECK(failing.next(b));
  CHECK_THROWS_WITH(failing.next(b), "cannot pin batch 3");
}

TEST_CASE("batches are pinned in the prefetcher only for a CUDA device with dataloader_pin_memory", "[unit][prefetch]") {
  CHECK_FALSE(pin_stage(torch::kCPU, true));
  CHECK_FALSE(pin_stage(torch::Device(torch::kLazy, 0), true));
  CHECK_FALSE(pin_stage(torch::Device(torch::kCUDA, 0), false));
  CHECK(pin_stage(torch::Device(torch::kCUDA, 0), true));  // built without touching CUDA: it runs only on batches
}
