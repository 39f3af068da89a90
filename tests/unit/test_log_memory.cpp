// MemoryTracker against HF's TrainerMemoryTracker definitions: a stage that allocates and frees a
// large tensor peaks by about its size and allocates about nothing; init figures ride with the first
// reported stage; nested stages are ignored; skip_memory_metrics reports nothing.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "log/memory_tracker.h"
#include "util/torch_compat.h"

using namespace hftrain;
using json = nlohmann::json;

namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kTensorBytes = 192 * kMiB;

// Allocates a float tensor of kTensorBytes (filled, so every page is resident), holds it, frees it.
void allocate_and_free(std::chrono::milliseconds hold) {
  torch::Tensor t = torch::ones({kTensorBytes / 4}, torch::kFloat32);
  REQUIRE(t.sum().item<double>() == static_cast<double>(kTensorBytes / 4));
  std::this_thread::sleep_for(hold);
}

}  // namespace

TEST_CASE("a stage that allocates and frees a large tensor: peaked ~ size, alloc ~ 0", "[unit][log]") {
  for (bool kernel_peak : {true, false}) {
    INFO("use_kernel_peak = " << kernel_peak);
    MemoryTracker tracker(/*enabled=*/true, kernel_peak);
    tracker.start("train");
    allocate_and_free(std::chrono::milliseconds(60));  // the sampler runs every 1 ms
    json m;
    tracker.stop_and_update_metrics("train", m);
    REQUIRE(m.contains("train_mem_cpu_peaked_delta"));
    REQUIRE(m.contains("train_mem_cpu_alloc_delta"));
    const int64_t peaked = m["train_mem_cpu_peaked_delta"].get<int64_t>();
    const int64_t alloc = m["train_mem_cpu_alloc_delta"].get<int64_t>();
    CHECK(peaked >= kTensorBytes * 9 / 10);
    CHECK(peaked <= kTensorBytes + 64 * kMiB);
    CHECK(std::llabs(alloc) < 16 * kMiB);
  }
}

TEST_CASE("memory kept at the end of a stage is allocation, not peak", "[unit][log]") {
  MemoryTracker tracker(true, false);
  tracker.start("eval");
  torch::Tensor kept = torch::ones({kTensorBytes / 4}, torch::kFloat32);
  json m;
  tracker.stop_and_update_metrics("eval", m);
  CHECK(m["eval_mem_cpu_alloc_delta"].get<int64_t>() >= kTensorBytes * 9 / 10);
  CHECK(m["eval_mem_cpu_peaked_delta"].get<int64_t>() < 16 * kMiB);
}

TEST_CASE("init figures go with the first reported stage, nested stages are ignored", "[unit][log]") {
  MemoryTracker tracker;
  tracker.start("init");
  tracker.stop("init");
  tracker.start("train");
  tracker.start("eval");  // evaluation inside training: ignored
  json nested;
  tracker.stop_and_update_metrics("eval", nested);
  CHECK(nested.empty());
  json train;
  tracker.stop_and_update_metrics("train", train);
  for (const char* k : {"init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta", "train_mem_cpu_alloc_delta",
                        "train_mem_cpu_peaked_delta", "before_init_mem_cpu"})
    CHECK(train.contains(k));
  CHECK(train["before_init_mem_cpu"].get<int64_t>() > 0);
  CHECK(train["before_init_mem_cpu"].get<int64_t>() == tracker.figures().at("init").begin);
  tracker.start("eval");
  json eval;
  tracker.stop_and_update_metrics("eval", eval);
  CHECK(eval.size() == 2);
  CHECK(eval.contains("eval_mem_cpu_alloc_delta"));
  CHECK(eval.contains("eval_mem_cpu_peaked_delta"));
}

TEST_CASE("skip_memory_metrics reports nothing", "[unit][log]") {
  MemoryTracker tracker(/*enabled=*/false);
  tracker.start("init");
  tracker.stop("init");
  tracker.start("train");
  json m;
  tracker.stop_and_update_metrics("train", m);
  CHECK(m.empty());
}

TEST_CASE("current_rss reads the process's resident set size", "[unit][log]") {
  const int64_t before = MemoryTracker::current_rss();
  CHECK(before > 0);
  torch::Tensor t = torch::ones({kTensorBytes / 4}, torch::kFloat32);
  CHECK(MemoryTracker::current_rss() - before >= kTensorBytes * 9 / 10);
}
