// `callbacks: [{type: profiler, ...}]` through the CLI: a run writes the kept window's Chrome trace and summary into
// <output_dir>/profile with the model's operators in them (forward, backward and the optimizer's), and a bad
// window option is refused naming its key.
#include <catch2/catch.hpp>

#include <set>

#include "cli_runner.h"

namespace {

const char* kSpec = R"(model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 16}
data: {type: digit_reversal, num_digits: 3, train_size: 64, eval_size: 8, test_size: 4}
training:
  output_dir: out
  per_device_train_batch_size: 8
  max_steps: 6
  logging_steps: 3
  eval_strategy: "no"
  save_strategy: "no"
)";

}  // namespace

TEST_CASE("profiler callback from the run spec: the window's trace and summary in output_dir/profile",
          "[integration][train]") {
  const std::string dir = fresh_dir("profiler_cli");
  write_text(dir + "/spec.yaml", std::string(kSpec) + "callbacks: [{type: profiler, wait: 2, warmup: 1, active: 2}]\n");
  const std::string output = run_ok("train spec.yaml", dir);
  CHECK_THAT(output, Catch::Contains("profiler: steps 4..5 written to"));
  const nlohmann::json trace = read_json(dir + "/out/profile/trace_rank0.json");
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) names.insert(e.at("name").get<std::string>());
  CHECK(names.count("aten::dropout") == 1);                          // forward
  CHECK(names.count("torch::autograd::AccumulateGrad") == 1);        // backward
  CHECK(names.count("aten::linalg_vector_norm") == 1);               // the step's gradient norm
  const std::string summary = read_text(dir + "/out/profile/summary_rank0.txt");
  CHECK(summary.rfind("steps 4..5", 0) == 0);
  CHECK_THAT(summary, Catch::Contains("host operators") && Catch::Contains("device kernels"));
}

TEST_CASE("profiler callback: a window option out of range is refused naming the key", "[integration][train]") {
  const std::string dir = fresh_dir("profiler_cli_bad");
  write_text(dir + "/spec.yaml", std::string(kSpec) + "callbacks: [{type: profiler, active: 0}]\n");
  const CliResult r = run_hftrain("train spec.yaml", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("active"));
}
