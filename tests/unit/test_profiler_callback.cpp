// The `profiler` callback (train/profiler_callback): PyTorch's profiler over torch.profiler.schedule's window of
// steps. Each simulated step runs an operator of its own besides one matrix product, so the written trace and
// summary show exactly which steps were kept: the waited and warm-up steps' operators must be absent, the kept
// steps' present with their call counts.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "train/profiler_callback.h"
#include "util/fs.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

// Steps 1..`steps` through the callback; step k runs one mm and the k-th operator of a list of distinct ones.
void run_steps(ProfilerCallback& cb, int64_t steps) {
  TrainerState state;
  TrainerControl control;
  const auto x = torch::randn({8, 8});
  const std::vector<std::function<torch::Tensor(const torch::Tensor&)>> own = {
      [](const torch::Tensor& t) { return t.tanh(); }, [](const torch::Tensor& t) { return t.sigmoid(); },
      [](const torch::Tensor& t) { return t.exp(); },  [](const torch::Tensor& t) { return t.sin(); },
      [](const torch::Tensor& t) { return t.cos(); },  [](const torch::Tensor& t) { return t.abs(); }};
  for (int64_t k = 0; k < steps; ++k) {
    state.global_step = k;
    cb.on_step_begin(state, control);
    own[static_cast<std::size_t>(k)](x.mm(x));
    state.global_step = k + 1;
    cb.on_step_end(state, control);
  }
  cb.on_train_end(state, control);
}

// A fresh scratch folder named `name`, removed when the test ends.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("hftrain_unit_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

// The callback writing under `output_dir` with schedule(wait, warmup, active).
std::unique_ptr<ProfilerCallback> profiler(const fs::path& output_dir, int64_t wait, int64_t warmup, int64_t active) {
  ProfilerCallback::Options options;
  options.wait = wait;
  options.warmup = warmup;
  options.active = active;
  CallbackContext context;
  context.output_dir = output_dir.string();
  return std::make_unique<ProfilerCallback>(options, context);
}

// Operator name -> calls in the written trace.
std::map<std::string, int> traced_calls(const std::string& folder) {
  const auto trace = nlohmann::json::parse(read_text_file(folder + "/trace_rank0.json"));
  std::map<std::string, int> calls;
  for (const auto& e : trace.at("traceEvents")) {
    CHECK(e.at("ph") == "X");
    CHECK(e.at("dur").get<double>() >= 0);
    calls[e.at("name").get<std::string>()] += 1;
  }
  return calls;
}

}  // namespace

TEST_CASE("profiler callback: keeps steps wait + warmup + 1 .. + active, as torch.profiler.schedule", "[unit][train]") {
  const Scratch scratch("profiler");
  const auto cb = profiler(scratch.dir, 1, 1, 2);
  run_steps(*cb, 6);
  const auto calls = traced_calls(cb->folder());
  CHECK(calls.count("aten::tanh") == 0);     // step 1: waited
  CHECK(calls.count("aten::sigmoid") == 0);  // step 2: warm-up, discarded
  CHECK(calls.at("aten::exp") == 1);         // steps 3 and 4: kept
  CHECK(calls.at("aten::sin") == 1);
  CHECK(calls.count("aten::cos") == 0);  // steps 5 and 6: after the window
  CHECK(calls.count("aten::abs") == 0);
  CHECK(calls.at("aten::mm") == 2);
  const std::string summary = read_text_file(cb->folder() + "/summary_rank0.txt");
  CHECK(summary.rfind("steps 3..4", 0) == 0);
  CHECK(summary.find("aten::exp") != std::string::npos);
  CHECK(summary.find("aten::tanh") == std::string::npos);
}

TEST_CASE("profiler callback: a run that ends inside the window keeps what it profiled, one before it writes nothing",
          "[unit][train]") {
  const Scratch inside_dir("profiler_inside"), before_dir("profiler_before");
  const auto inside = profiler(inside_dir.dir, 0, 0, 5);
  run_steps(*inside, 2);
  const auto calls = traced_calls(inside->folder());
  CHECK(calls.at("aten::tanh") == 1);
  CHECK(calls.at("aten::sigmoid") == 1);
  CHECK(read_text_file(inside->folder() + "/summary_rank0.txt").rfind("steps 1..2", 0) == 0);
  const auto before = profiler(before_dir.dir, 4, 0, 5);
  run_steps(*before, 2);
  CHECK_FALSE(fs::exists(before->folder()));
}
