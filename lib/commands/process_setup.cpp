// Process setup shared by the commands (see process_setup.h).
#include "commands/process_setup.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include <ATen/Context.h>

#include "distributed/comm.h"
#include "distributed/device_probe.h"
#include "log/logger.h"
#include "log/metrics_format.h"
#include "log/run_summary.h"
#include "models/parameter_counts.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/threads.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace fs = std::filesystem;

const char* const kSavedSpecName = "run_spec.yaml";

void save_metrics(const std::string& output_dir, const std::string& split, const nlohmann::json& metrics) {
  write_file_atomic(output_dir + "/" + split + "_results.json", metrics.dump(4) + "\n");
  const std::string all_path = output_dir + "/all_results.json";
  nlohmann::json all = nlohmann::json::object();
  if (fs::exists(all_path)) {
    try {
      all = nlohmann::json::parse(read_text_file(all_path));
    } catch (const nlohmann::json::exception&) {
      all = nlohmann::json::object();
    }
  }
  all.update(metrics);
  write_file_atomic(all_path, all.dump(4) + "\n");
}

void apply_determinism(const TrainingArgs& t) {
  if (t.full_determinism) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

void setup_threads(const DistributedArgs& d, int local_workers) {
  ThreadPlan plan = configure_threads(static_cast<int>(d.intra_op_threads), local_workers);
  log_debug("threads: " + std::to_string(plan.intra_op_threads) + " intra-op (BLAS: " + plan.blas + ")");
}

void fit_threads_to_step(const DistributedArgs& d, int local_workers, const ModelAndData& p, int64_t batch_size,
                         double flops_per_param_token) {
  if (d.intra_op_threads > 0) return;  // the user's count, set at start, stands
  const double tokens = static_cast<double>(batch_size) * static_cast<double>(std::max<int64_t>(1, p.data->shape().max_length));
  const double step_flops = flops_per_param_token * static_cast<double>(count_parameters(*p.model).total) * tokens;
  const ThreadPlan plan = choose_threads(0, local_workers, step_flops);
  if (plan.reason.empty()) return;  // not a small step: the count set at start stands
  apply_thread_plan(plan);
  log_info("threads: 1 intra-op thread: " + plan.reason + " (distributed.intra_op_threads overrides)");
}

void print_metrics(const std::string& split, const nlohmann::json& metrics) {
  if (is_world_process_zero()) std::cout << metrics_table(split, metrics) << std::flush;
}

int64_t split_size(const ModelAndData& p, const std::string& split) {
  auto d = p.data->split(split);
  return d ? d->size() : 0;
}

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeFailure("cannot create output_dir '" + dir + "': " + ec.message());
}

void resolve_worker_count(RunSpec& spec, std::vector<std::string>& overrides) {
  WorkerCount& n = spec.distributed.nproc_per_node;
  if (!n.automatic) return;
  const WorkerCountChoice choice = choose_worker_count(kCudaBuild, spec.training.use_cpu, process_env, NvmlGpuInventory());
  log_info("distributed.nproc_per_node auto: " + choice.reason);
  n = WorkerCount{choice.count, false};
  overrides.push_back("distributed.nproc_per_node=" + std::to_string(choice.count));
}

DeviceChoice select_device(const RunSpec& spec, const DistEnv& env) {
  const TorchDeviceProbe probe;
  const DeviceChoice choice =
      choose_device(kCudaBuild, spec.training.use_cpu, spec.distributed.backend, env.local_rank, probe.gpu_count());
  const std::string mine = describe_device(choice, probe);
  if (choice.on_gpu()) {
    set_current_gpu(choice.cuda_index);
    if (!choice.sharing.empty()) log_info("device: " + choice.sharing);
    if (env.world_size > 1)  // one process has trained on an H100; several GPUs have not yet (docs/gpu.md)
      log_warning("device: " + mine + ": training on several GPUs (collectives over " + choice.backend + ") "
                  "has not yet run on a machine with more than one GPU (docs/gpu.md)");
  }
  log_debug("device: " + mine + (choice.reason.empty() ? "" : " (" + choice.reason + ")") + ", collectives over " +
            choice.backend);
  return choice;
}

void report_rank_devices(const DeviceChoice& choice) {
  const std::string mine = describe_device(choice, TorchDeviceProbe());
  std::vector<std::string> all{mine};
  if (world().world_size() > 1) {
    constexpr std::size_t kMaxChars = 160;
    std::vector<int64_t> packed(kMaxChars + 1, 0);
    packed[0] = static_cast<int64_t>(std::min(mine.size(), kMaxChars));
    for (std::size_t i = 0; i < static_cast<std::size_t>(packed[0]); ++i)
      packed[i + 1] = static_cast<unsigned char>(mine[i]);
    all.clear();
    for (const auto& row : world().all_gather_ints(packed, "device names")) {
      std::string text;
      for (int64_t i = 0; i < row[0]; ++i) text += static_cast<char>(row[static_cast<std::size_t>(i + 1)]);
      all.push_back(text);
    }
  }
  set_compute_device(describe_rank_devices(all));
}

}  // namespace hftrain
