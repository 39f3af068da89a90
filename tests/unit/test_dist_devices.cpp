// Device selection with fake GPUs: CUDA_VISIBLE_DEVICES parsing (CUDA's rules), the launcher's GPU count
// from a fake driver inventory, nproc_per_node auto, the device and backend of each LOCAL_RANK, use_cpu,
// the refusals, the run-start device text from a fake probe, and HF's GPU memory metrics from fake
// allocator counters.
#include <catch2/catch.hpp>

#include <map>

#include "distributed/device_probe.h"
#include "distributed/devices.h"
#include "log/memory_tracker.h"
#include "runspec/sections.h"
#include "util/error.h"
#include "util/torch_compat.h"
#include "fake_env.h"

using hftrain_test::fake_env;

using namespace hftrain;

namespace {

// A driver that lists these GPUs (or none answering: nullopt).
class FakeInventory : public GpuInventory {
 public:
  explicit FakeInventory(std::optional<std::vector<std::string>> uuids) : uuids_(std::move(uuids)) {}
  std::optional<std::vector<std::string>> gpu_uuids() const override { return uuids_; }

 private:
  std::optional<std::vector<std::string>> uuids_;
};

const std::vector<std::string> kFourGpus = {"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
                                            "GPU-1a2b3c4d-0000-1111-2222-333344445555",
                                            "GPU-1a2b9999-0000-1111-2222-333344445555",
                                            "GPU-ffee0011-aaaa-bbbb-cccc-ddddeeeeffff"};

int visible(const std::optional<std::string>& cuda_visible_devices, const std::vector<std::string>& gpus = kFourGpus) {
  std::map<std::string, std::string> vars;
  if (cuda_visible_devices) vars["CUDA_VISIBLE_DEVICES"] = *cuda_visible_devices;
  return count_visible_gpus(fake_env(vars), FakeInventory(gpus)).count;
}

class FakeProbe : public DeviceProbe {
 public:
  int gpu_count() const override { return 2; }
  std::string gpu_name(int index) const override { return index == 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-40GB"; }
  int64_t gpu_total_memory(int index) const override { return index == 0 ? 85520809984LL : 42505273344LL; }
};

class FakeGpuMemory : public GpuMemoryCounters {
 public:
  int64_t allocated() override { return current; }
  int64_t peak_allocated() override { return peak; }
  void reset_peak() override {
    peak = current;
    ++resets;
  }
  void release_cached() override { ++releases; }
  void allocate(int64_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
  }
  int64_t current = 0, peak = 0;
  int resets = 0, releases = 0;
};

}  // namespace

TEST_CASE("dist devices: CUDA_VISIBLE_DEVICES is parsed as CUDA reads it", "[unit][dist]") {
  SECTION("unset: not restricted") {
    const VisibleDevices v = parse_cuda_visible_devices(std::nullopt);
    CHECK_FALSE(v.restricted);
    CHECK(v.indices.empty());
  }
  SECTION("empty string: restricted to nothing") {
    const VisibleDevices v = parse_cuda_visible_devices(std::string());
    CHECK(v.restricted);
    CHECK(v.indices.empty());
    CHECK(v.ids.empty());
  }
  SECTION("indices keep their order") {
    CHECK(parse_cuda_visible_devices(std::string("0,1")).indices == std::vector<int>{0, 1});
    CHECK(parse_cuda_visible_devices(std::string("1,0")).indices == std::vector<int>{1, 0});
    CHECK(parse_cuda_visible_devices(std::string("3")).indices == std::vector<int>{3});
  }
  SECTION("the first invalid entry ends the list") {
    CHECK(parse_cuda_visible_devices(std::string("0,-1,2")).indices == std::vector<int>{0});
    CHECK(parse_cuda_visible_devices(std::string("0,2,-1,1")).indices == std::vector<int>{0, 2});  // CUDA's example
    CHECK(parse_cuda_visible_devices(std::string("1,x,2")).indices == std::vector<int>{1});
    CHECK(parse_cuda_visible_devices(std::string("2,,3")).indices == std::vector<int>{2});
    CHECK(parse_cuda_visible_devices(std::string("-1")).indices.empty());
  }
  SECTION("spaces around entries are ignored, trailing text after the digits too (strtoul)") {
    CHECK(parse_cuda_visible_devices(std::string(" 0, 1 ,2")).indices == std::vector<int>{0, 1, 2});
    CHECK(parse_cuda_visible_devices(std::string("1gpu,2")).indices == std::vector<int>{1, 2});
  }
  SECTION("a repeated index hides every device") {
    const VisibleDevices v = parse_cuda_visible_devices(std::string("0,1,0"));
    CHECK(v.duplicate);
    CHECK(v.indices.empty());
  }
  SECTION("UUID prefixes, ending at the first entry that is not one") {
    const VisibleDevices v = parse_cuda_visible_devices(std::string("GPU-8932f937,GPU-1a2b3c,0"));
    CHECK(v.ids == std::vector<std::string>{"GPU-8932f937", "GPU-1a2b3c"});
    CHECK(v.indices.empty());
    CHECK(parse_cuda_visible_devices(std::string("MIG-abc")).ids == std::vector<std::string>{"MIG-abc"});
  }
}

TEST_CASE("dist devices: visible GPUs are counted from the driver list without CUDA", "[unit][dist]") {
  CHECK(visible(std::nullopt) == 4);
  CHECK(visible(std::string()) == 0);
  CHECK(visible(std::string("0,1")) == 2);
  CHECK(visible(std::string("1,0")) == 2);
  CHECK(visible(std::string("0,-1,2")) == 1);
  CHECK(visible(std::string(" 3 , 2")) == 2);
  CHECK(visible(std::string("2,7,1")) == 1);  // 7 is not a GPU of this machine: the list ends there
  CHECK(visible(std::string("0,0")) == 0);
  CHECK(visible(std::string("GPU-8932")) == 1);
  CHECK(visible(std::string("GPU-ffee,GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")) == 2);
  CHECK(visible(std::string("GPU-1a2b")) == 0);            // two GPUs start so: ambiguous, invalid
  CHECK(visible(std::string("GPU-8932,GPU-1a2b,GPU-ffee")) == 1);
  CHECK(visible(std::string("GPU-0000,GPU-8932")) == 0);   // no such GPU: the list ends at once
  CHECK(visible(std::string("GPU-8932,GPU-8932f9")) == 0);  // one GPU named twice
  CHECK(visible(std::string("MIG-GPU-8932f937/1/0")) == 1);
  CHECK(visible(std::nullopt, {}) == 0);
  const GpuCount no_driver = count_visible_gpus(fake_env({}), FakeInventory(std::nullopt));
  CHECK(no_driver.count == 0);
  CHECK_THAT(no_driver.explanation, Catch::Contains("no NVIDIA driver"));
  const GpuCount some = count_visible_gpus(fake_env({{"CUDA_VISIBLE_DEVICES", "1,0"}}), FakeInventory(kFourGpus));
  CHECK(some.explanation == "2 of the machine's 4 GPUs (CUDA_VISIBLE_DEVICES='1,0')");
}

TEST_CASE("dist devices: nproc_per_node auto starts one worker per visible GPU, else 1", "[unit][dist]") {
  const FakeInventory four(kFourGpus);
  const WorkerCountChoice all = choose_worker_count(true, false, fake_env({}), four);
  CHECK(all.count == 4);
  CHECK_THAT(all.reason, Catch::Contains("one per visible GPU"));
  CHECK(choose_worker_count(true, false, fake_env({{"CUDA_VISIBLE_DEVICES", "2,3"}}), four).count == 2);
  const WorkerCountChoice hidden = choose_worker_count(true, false, fake_env({{"CUDA_VISIBLE_DEVICES", ""}}), four);
  CHECK(hidden.count == 1);
  CHECK_THAT(hidden.reason, Catch::Contains("no GPU is visible") && Catch::Contains("CUDA_VISIBLE_DEVICES=''"));
  const WorkerCountChoice cpu = choose_worker_count(true, true, fake_env({}), four);
  CHECK(cpu.count == 1);
  CHECK_THAT(cpu.reason, Catch::Contains("training.use_cpu"));
  const WorkerCountChoice no_cuda = choose_worker_count(false, false, fake_env({}), four);
  CHECK(no_cuda.count == 1);
  CHECK_THAT(no_cuda.reason, Catch::Contains("has no CUDA"));
}

TEST_CASE("dist devices: each LOCAL_RANK takes its own GPU, backend auto is nccl there and gloo on the CPU",
          "[unit][dist]") {
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceChoice d = choose_device(true, false, "auto", rank, 4);
    CHECK(d.on_gpu());
    CHECK(d.cuda_index == rank);
    CHECK(d.device() == "cuda:" + std::to_string(rank));
    CHECK(d.backend == "nccl");  // as torchrun and HF's Trainer choose for CUDA
  }
  CHECK(choose_device(true, false, "gloo", 1, 2).backend == "gloo");  // asked for: through host memory
  CHECK(choose_device(true, false, "nccl", 1, 2).backend == "nccl");
  const DeviceChoice no_gpu = choose_device(true, false, "auto", 0, 0);
  CHECK(no_gpu.device() == "cpu");
  CHECK(no_gpu.backend == "gloo");
  const DeviceChoice forced = choose_device(true, true, "auto", 3, 8);
  CHECK(forced.device() == "cpu");
  CHECK(forced.backend == "gloo");
  CHECK(forced.reason == "training.use_cpu is set");
  const DeviceChoice cpu_build = choose_device(false, false, "gloo", 2, 0);
  CHECK(cpu_build.device() == "cpu");
  CHECK_THAT(cpu_build.reason, Catch::Contains("no CUDA"));
}

TEST_CASE("dist devices: a LOCAL_RANK beyond the visible GPUs and nccl without a GPU are refused", "[unit][dist]") {
  try {
    choose_device(true, false, "auto", 2, 2);
    FAIL("LOCAL_RANK 2 with 2 GPUs was accepted");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("LOCAL_RANK=2") && Catch::Contains("sees 2 GPUs") && Catch::Contains("cuda:1"));
    CHECK(e.exit_code() == 2);
  }
  CHECK_THROWS_WITH(choose_device(true, true, "nccl", 0, 4),
                    Catch::Contains("nccl needs a CUDA GPU") && Catch::Contains("training.use_cpu"));
  CHECK_THROWS_WITH(choose_device(true, false, "nccl", 0, 0), Catch::Contains("sees no GPU"));
  CHECK_THROWS_AS(choose_device(false, false, "nccl", 0, 0), ConfigError);
}

TEST_CASE("dist devices: with backend gloo, more workers than GPUs share them round-robin and say so", "[unit][dist]") {
  for (int rank = 0; rank < 5; ++rank) {
    INFO("LOCAL_RANK " << rank);
    const DeviceChoice d = choose_device(true, false, "gloo", rank, 2);
    CHECK(d.cuda_index == rank % 2);
    CHECK(d.backend == "gloo");
    CHECK(d.sharing.empty() == (rank < 2));
  }
  const DeviceChoice third = choose_device(true, false, "gloo", 2, 1);
  CHECK(third.device() == "cuda:0");
  CHECK(third.sharing == "LOCAL_RANK=2 shares cuda:0 with every worker whose LOCAL_RANK is 0 modulo 1: more workers "
                         "than the 1 GPU this process sees, dealt out round-robin (distributed.backend gloo)");
  CHECK_THAT(choose_device(true, false, "gloo", 5, 2).sharing,
             Catch::StartsWith("LOCAL_RANK=5 shares cuda:1 with every worker whose LOCAL_RANK is 1 modulo 2"));
  CHECK_THROWS_WITH(choose_device(true, false, "auto", 1, 1),
                    Catch::Contains("LOCAL_RANK=1 has no GPU of its own") && Catch::Contains("distributed.backend: gloo"));
  CHECK(choose_device(true, false, "auto", 0, 1).sharing.empty());
}

TEST_CASE("dist devices: the run-start device text names each rank's GPU", "[unit][dist]") {
  const FakeProbe probe;
  CHECK(describe_device(choose_device(true, false, "auto", 0, probe.gpu_count()), probe) ==
        "cuda:0 (NVIDIA H100 80GB HBM3, 79.6 GiB)");
  CHECK(describe_device(choose_device(true, false, "auto", 1, probe.gpu_count()), probe) ==
        "cuda:1 (NVIDIA A100-SXM4-40GB, 39.6 GiB)");
  CHECK(describe_device(choose_device(true, true, "auto", 1, probe.gpu_count()), probe) == "cpu");
  CHECK(describe_rank_devices({"cpu", "cpu", "cpu"}) == "cpu");
  CHECK(describe_rank_devices({"cuda:0 (A, 1.0 GiB)", "cuda:1 (B, 2.0 GiB)"}) ==
        "rank 0: cuda:0 (A, 1.0 GiB); rank 1: cuda:1 (B, 2.0 GiB)");
}

TEST_CASE("dist devices: this build's probe agrees with the CUDA guard", "[unit][dist]") {
  const TorchDeviceProbe probe;
  if (!kCudaBuild) {
    CHECK(probe.gpu_count() == 0);
    CHECK_THROWS_AS(probe.gpu_name(0), RuntimeFailure);
    CHECK(cuda_memory_counters(0) == nullptr);
    CHECK_THROWS_WITH(set_current_gpu(0), Catch::Contains("has no CUDA"));
  } else {
    CHECK(probe.gpu_count() >= 0);
  }
}

TEST_CASE("dist devices: nproc_per_node takes a number or auto in the spec", "[unit][dist]") {
  WorkerCount w;
  CHECK(ValueTraits<WorkerCount>::parse(YAML::Load("auto"), w));
  CHECK(w.automatic);
  CHECK(ValueTraits<WorkerCount>::dump(w).Scalar() == "auto");
  CHECK(ValueTraits<WorkerCount>::parse(YAML::Load("3"), w));
  CHECK_FALSE(w.automatic);
  CHECK(w.count == 3);
  CHECK(ValueTraits<WorkerCount>::dump(w).as<int64_t>() == 3);
  CHECK_FALSE(ValueTraits<WorkerCount>::parse(YAML::Load("gpu"), w));
}

TEST_CASE("memory tracker adds HF's GPU keys only when it has a GPU's counters", "[unit][log]") {
  SECTION("no GPU: cpu keys only") {
    MemoryTracker memory(true, false);
    memory.start("init");
    memory.stop("init");
    memory.start("train");
    memory.stop("train");
    nlohmann::json metrics;
    memory.update_metrics("train", metrics);
    CHECK(metrics.contains("train_mem_cpu_alloc_delta"));
    CHECK(metrics.contains("before_init_mem_cpu"));
    for (const auto& [key, value] : metrics.items()) CHECK(key.find("gpu") == std::string::npos);
  }
  SECTION("a GPU: alloc = end - start, peaked = max(0, peak - end), before_init_mem_gpu") {
    auto gpu = std::make_shared<FakeGpuMemory>();
    gpu->allocate(1000);  // before init
    MemoryTracker memory(true, false);
    memory.set_gpu(gpu);
    memory.start("init");
    gpu->allocate(500);  // the model: kept
    memory.stop("init");
    memory.start("train");
    gpu->allocate(4000);  // activations: freed again
    gpu->allocate(-4000);
    gpu->allocate(250);  // optimizer state: kept
    memory.stop("train");
    nlohmann::json metrics;
    memory.update_metrics("train", metrics);
    CHECK(metrics["before_init_mem_gpu"] == 1000);
    CHECK(metrics["init_mem_gpu_alloc_delta"] == 500);
    CHECK(metrics["init_mem_gpu_peaked_delta"] == 0);
    CHECK(metrics["train_mem_gpu_alloc_delta"] == 250);
    CHECK(metrics["train_mem_gpu_peaked_delta"] == 5500 - 1750);  // peak 5500 during the stage, 1750 at its end
    CHECK(gpu->resets == 2);
    CHECK(gpu->releases == 4);  // HF empties the cache at each start and stop
  }
}
