// Which device each worker computes on, and how many workers `nproc_per_node: auto` starts.
//
// Rules (HF Trainer / torchrun conventions):
//   - training.use_cpu, a LibTorch without CUDA, or no visible GPU: the CPU, collectives over gloo;
//   - otherwise the worker with LOCAL_RANK r takes cuda:r, the r-th GPU CUDA enumerates after applying
//     CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (a LOCAL_RANK at or beyond the visible count is a
//     ConfigError naming both);
//   - distributed.backend auto = nccl on GPUs (comm_nccl.h), gloo on the CPU; gloo on GPUs moves the
//     tensors through host memory; nccl on the CPU is refused;
//   - nproc_per_node auto = the number of visible GPUs, or 1 on the CPU (with the reason).
// The launcher counts GPUs without creating a CUDA context (a forked worker could not use one): it asks
// the driver (NVML) for the machine's GPUs and applies CUDA_VISIBLE_DEVICES itself, as PyTorch's
// NVML-based count does. Both the GPU list and the per-device facts come through small interfaces
// (GpuInventory, DeviceProbe), so the rules are unit-tested with fakes on machines without GPUs.
// No LibTorch here; the LibTorch-backed probe is dist/device_probe.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/env.h"

namespace hftrain {

// What the process's LibTorch sees (after CUDA_VISIBLE_DEVICES): the count, and per CUDA index the
// device's name and total memory.
class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  virtual int gpu_count() const = 0;
  virtual std::string gpu_name(int index) const = 0;
  virtual int64_t gpu_total_memory(int index) const = 0;  // bytes
};

// The machine's GPUs as the driver lists them, before CUDA_VISIBLE_DEVICES; nullopt when that cannot be
// known (no driver library, or the driver failed).
class GpuInventory {
 public:
  virtual ~GpuInventory() = default;
  // UUIDs ("GPU-8932f937-..."), one per GPU, in the driver's index order.
  virtual std::optional<std::vector<std::string>> gpu_uuids() const = 0;
};

// NVML (libnvidia-ml.so.1, loaded at run time; absent on machines without the NVIDIA driver). NVML does
// not create a CUDA context, so the launcher may ask before it forks its workers.
class NvmlGpuInventory : public GpuInventory {
 public:
  std::optional<std::vector<std::string>> gpu_uuids() const override;
};

// CUDA_VISIBLE_DEVICES as CUDA reads it: entries are indices or UUID prefixes ("GPU-..."; "MIG-..." for
// MIG instances); the list ends at the first entry that is not valid.
struct VisibleDevices {
  bool restricted = false;       // the variable is set (even to "")
  std::vector<int> indices;      // index entries, in order, up to the first invalid one
  std::vector<std::string> ids;  // UUID-prefix entries ("GPU-..." or "MIG-..."), in order
  bool duplicate = false;        // an entry repeated: CUDA then shows no device
};
VisibleDevices parse_cuda_visible_devices(const std::optional<std::string>& value);

// How many GPUs a CUDA program started with this environment would see, without starting CUDA.
struct GpuCount {
  int count = 0;
  std::string explanation;  // "2 of the machine's 4 GPUs (CUDA_VISIBLE_DEVICES=1,0)"
};
GpuCount count_visible_gpus(const EnvLookup& env, const GpuInventory& inventory);

// `nproc_per_node: auto` (or --nproc-per-node auto): workers for this node, and why.
struct WorkerCountChoice {
  int count = 1;
  std::string reason;  // for the log line
};
WorkerCountChoice choose_worker_count(bool cuda_build, bool use_cpu, const EnvLookup& env, const GpuInventory& inventory);

// The device of one worker.
struct DeviceChoice {
  int cuda_index = -1;   // -1 = the CPU
  std::string backend;   // "gloo" or "nccl"
  std::string reason;    // why the CPU, when it is the CPU ("" on a GPU)
  std::string sharing;   // on a GPU other workers of this node also use (gloo only): which, and why
  bool on_gpu() const { return cuda_index >= 0; }
  std::string device() const { return on_gpu() ? "cuda:" + std::to_string(cuda_index) : "cpu"; }
};
// `backend` is distributed.backend (auto, gloo, nccl); `visible_gpus` is what the process's LibTorch sees
// (0 on a build without CUDA). Each LOCAL_RANK takes its own GPU; with more workers than GPUs, backend gloo
// deals them out round-robin (LOCAL_RANK mod the GPUs: several ranks on one GPU, which NCCL refuses), and any
// other backend is refused. ConfigError for an impossible combination.
DeviceChoice choose_device(bool cuda_build, bool use_cpu, const std::string& backend, int local_rank, int visible_gpus);

// "cpu" or "cuda:1 (NVIDIA H100 80GB HBM3, 79.1 GiB)".
std::string describe_device(const DeviceChoice& choice, const DeviceProbe& probe);
// The run-start block's device line for all ranks: one description when every rank has the same, else
// "rank 0: cuda:0 (...); rank 1: cuda:1 (...)".
std::string describe_rank_devices(const std::vector<std::string>& per_rank);

}  // namespace hftrain
