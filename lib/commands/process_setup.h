// Process setup shared by the train, eval and predict commands: determinism, threads, the compute
// device, the worker count, output directories and HF's metrics files (save_metrics / log_metrics).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed/devices.h"
#include "distributed/env.h"
#include "train/model_and_data.h"

namespace hftrain {

// The run spec a run directory holds (written when training starts).
extern const char* const kSavedSpecName;

// HF enable_full_determinism: torch's deterministic algorithms (seeding is done where each RNG is made).
void apply_determinism(const TrainingArgs& t);

// The intra-op thread count for `local_workers` processes on this machine (util/threads.h).
void setup_threads(const DistributedArgs& d, int local_workers = 1);

// Once the model and data are known: the work of one micro-batch, `flops_per_param_token` (6 training,
// 2 forward only) x parameters x examples x tokens per example (1 for feature rows), for the small-step
// thread rule (util/threads.h). Tied weights count once; the LM head's matmul is counted with them.
void fit_threads_to_step(const DistributedArgs& d, int local_workers, const ModelAndData& p, int64_t batch_size,
                         double flops_per_param_token);

// This process's device and collective backend (dist/devices.h), the GPU made current. Chosen before the
// process group forms: NCCL binds to the device.
DeviceChoice select_device(const RunSpec& spec, const DistEnv& env);
// Records every rank's device for the run-start block: each rank takes part in the exchange of device
// names (one small all-gather over world()), so rank 0's block names each rank's.
void report_rank_devices(const DeviceChoice& choice);

// distributed.nproc_per_node auto, in a process that is not a worker: the number of workers this node
// starts (dist/devices.h), logged with the reason, and written into the spec and into `overrides` (which
// the workers receive), so every process and the saved run_spec.yaml see the number.
void resolve_worker_count(RunSpec& spec, std::vector<std::string>& overrides);

// Creates `dir` (and its parents); RuntimeFailure naming it when that fails.
void ensure_output_dir(const std::string& dir);

// HF save_metrics: <split>_results.json (indent 4, sorted keys) and merged into all_results.json.
void save_metrics(const std::string& output_dir, const std::string& split, const nlohmann::json& metrics);

// HF log_metrics: the "***** split metrics *****" table on stdout, world process zero only.
void print_metrics(const std::string& split, const nlohmann::json& metrics);

// Size of a split for the run-start block (0 when absent; evaluate() then explains).
int64_t split_size(const ModelAndData& p, const std::string& split);

}  // namespace hftrain
