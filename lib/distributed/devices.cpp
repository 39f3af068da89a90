// Worker devices, GPU counting and CUDA_VISIBLE_DEVICES (see devices.h).
#include "distributed/devices.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "util/error.h"

namespace hftrain {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// The number an index entry starts with, as strtoul reads it ("1gpu" is 1); -1 when it does not start
// with digits (an optional sign first) or is negative.
long long leading_index(const std::string& entry) {
  std::size_t i = 0;
  bool negative = false;
  if (i < entry.size() && (entry[i] == '+' || entry[i] == '-')) negative = entry[i++] == '-';
  const std::size_t digits_start = i;
  long long v = 0;
  while (i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i])) && v < (1LL << 40))
    v = v * 10 + (entry[i++] - '0');
  if (i == digits_start) return -1;
  return negative && v != 0 ? -1 : v;
}

// NVML's C interface, resolved from libnvidia-ml.so.1 at run time (nvml.h: nvmlReturn_t is an enum whose
// success value is 0; nvmlDevice_t an opaque pointer).
using NvmlStatus = int;
using NvmlDevice = void*;
constexpr unsigned kNvmlUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

}  // namespace

std::optional<std::vector<std::string>> NvmlGpuInventory::gpu_uuids() const {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::nullopt;
  auto init = reinterpret_cast<NvmlStatus (*)()>(::dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlStatus (*)()>(::dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<NvmlStatus (*)(unsigned*)>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<NvmlStatus (*)(unsigned, NvmlDevice*)>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto uuid = reinterpret_cast<NvmlStatus (*)(NvmlDevice, char*, unsigned)>(::dlsym(lib, "nvmlDeviceGetUUID"));
  std::optional<std::vector<std::string>> result;
  if (init && shutdown && count && handle && uuid && init() == 0) {
    unsigned n = 0;
    if (count(&n) == 0) {
      std::vector<std::string> uuids;
      for (unsigned i = 0; i < n; ++i) {
        NvmlDevice device = nullptr;
        char buffer[kNvmlUuidBufferSize] = {};
        if (handle(i, &device) != 0 || uuid(device, buffer, kNvmlUuidBufferSize) != 0) buffer[0] = '\0';
        uuids.emplace_back(buffer);  // an unreadable UUID still counts as a GPU; it matches no prefix
      }
      result = uuids;
    }
    shutdown();
  }
  ::dlclose(lib);
  return result;
}

// The rules are CUDA's ("CUDA Environment Variables", CUDA C++ Programming Guide): CUDA_VISIBLE_DEVICES is
// "a comma-separated sequence of GPU identifiers ... given as integer indices or as UUID strings"; a UUID
// may be abbreviated to "enough digits from the beginning of the GPU UUID to uniquely identify that GPU";
// "if one of the indices is invalid, only the devices whose index precedes the invalid index are visible"
// (0,2,-1,1 shows devices 0 and 2). PyTorch's NVML-based count (torch.cuda._parse_visible_devices) reads it
// the same way and adds what CUDA does in practice: an index entry is read like strtoul after trimming
// spaces ("1gpu" is 1), a list that starts with "GPU-" / "MIG-" is a UUID list and ends at the first
// entry without that prefix, and a repeated entry makes the set empty. Set to "" no GPU is visible.
VisibleDevices parse_cuda_visible_devices(const std::optional<std::string>& value) {
  VisibleDevices v;
  if (!value) return v;
  v.restricted = true;
  const std::string& text = *value;
  if (text.rfind("GPU-", 0) == 0 || text.rfind("MIG-", 0) == 0) {
    const std::string prefix = text.substr(0, 4);
    for (const auto& entry : split_commas(text)) {
      if (std::find(v.ids.begin(), v.ids.end(), entry) != v.ids.end()) {
        v.ids.clear();
        v.duplicate = true;
        return v;
      }
      if (entry.rfind(prefix, 0) != 0) break;
      v.ids.push_back(entry);
    }
    return v;
  }
  if (trim(text).empty()) return v;
  for (const auto& entry : split_commas(text)) {
    const long long x = leading_index(trim(entry));
    if (x >= 0 && std::find(v.indices.begin(), v.indices.end(), static_cast<int>(x)) != v.indices.end()) {
      v.indices.clear();
      v.duplicate = true;
      return v;
    }
    if (x < 0) break;
    v.indices.push_back(static_cast<int>(x));
  }
  return v;
}

GpuCount count_visible_gpus(const EnvLookup& env, const GpuInventory& inventory) {
  std::string raw;
  std::optional<std::string> value;
  if (env("CUDA_VISIBLE_DEVICES", raw)) value = raw;
  const VisibleDevices visible = parse_cuda_visible_devices(value);
  const std::string setting = value ? "CUDA_VISIBLE_DEVICES='" + *value + "'" : "CUDA_VISIBLE_DEVICES unset";
  GpuCount result;
  if (visible.restricted && visible.indices.empty() && visible.ids.empty()) {
    result.explanation = visible.duplicate ? "a repeated entry in " + setting + " hides every GPU"
                                           : setting + " shows no GPU";
    return result;
  }
  const auto machine = inventory.gpu_uuids();
  if (!machine) {
    result.explanation = "no NVIDIA driver answered (libnvidia-ml.so.1 not found or not working; " + setting + ")";
    return result;
  }
  const int total = static_cast<int>(machine->size());
  const std::string of_total = " of the machine's " + std::to_string(total) + " GPU" + (total == 1 ? "" : "s");
  if (!visible.restricted) {
    result.count = total;
    result.explanation = std::to_string(total) + " GPU" + (total == 1 ? "" : "s") + " (" + setting + ")";
    return result;
  }
  if (!visible.indices.empty()) {
    // An index the machine does not have is invalid: the list ends before it.
    for (int i : visible.indices) {
      if (i >= total) break;
      ++result.count;
    }
  } else if (visible.ids.front().rfind("MIG-", 0) == 0) {
    // A CUDA process enumerates at most one MIG instance (NVIDIA MIG User Guide, "CUDA Device
    // Enumeration"); which instances exist is not checked here.
    result.count = total > 0 ? 1 : 0;
  } else {
    std::vector<int> ordinals;
    for (const auto& id : visible.ids) {
      int match = -1;
      bool ambiguous = false;
      for (int k = 0; k < total; ++k)
        if (!(*machine)[static_cast<std::size_t>(k)].empty() && (*machine)[static_cast<std::size_t>(k)].rfind(id, 0) == 0) {
          ambiguous = ambiguous || match >= 0;
          match = k;
        }
      if (match < 0 || ambiguous) break;  // the first invalid entry ends the list
      if (std::find(ordinals.begin(), ordinals.end(), match) != ordinals.end()) {
        ordinals.clear();  // two prefixes of one GPU: a repeat, no GPU visible
        break;
      }
      ordinals.push_back(match);
    }
    result.count = static_cast<int>(ordinals.size());
  }
  result.explanation = std::to_string(result.count) + of_total + " (" + setting + ")";
  return result;
}

WorkerCountChoice choose_worker_count(bool cuda_build, bool use_cpu, const EnvLookup& env, const GpuInventory& inventory) {
  WorkerCountChoice c;
  if (!cuda_build) {
    c.reason = "1 worker: this build's LibTorch has no CUDA, so it runs on the CPU (give a number to start more CPU workers)";
    return c;
  }
  if (use_cpu) {
    c.reason = "1 worker: training.use_cpu is set (give a number to start more CPU workers)";
    return c;
  }
  const GpuCount gpus = count_visible_gpus(env, inventory);
  if (gpus.count == 0) {
    c.reason = "1 worker on the CPU: no GPU is visible: " + gpus.explanation;
    return c;
  }
  c.count = gpus.count;
  c.reason = std::to_string(gpus.count) + " worker" + (gpus.count == 1 ? "" : "s") + ", one per visible GPU: " + gpus.explanation;
  return c;
}

DeviceChoice choose_device(bool cuda_build, bool use_cpu, const std::string& backend, int local_rank, int visible_gpus) {
  DeviceChoice c;
  if (use_cpu) c.reason = "training.use_cpu is set";
  else if (!cuda_build) c.reason = "this build's LibTorch has no CUDA";
  else if (visible_gpus <= 0) c.reason = "this process sees no GPU";
  if (!c.reason.empty()) {
    if (backend == "nccl")
      throw ConfigError("distributed.backend: nccl needs a CUDA GPU for every worker, and " + c.reason +
                        "; use gloo (or auto)");
    c.backend = "gloo";
    return c;
  }
  const std::string gpus = std::to_string(visible_gpus) + " GPU" + (visible_gpus == 1 ? "" : "s");
  if (local_rank >= visible_gpus && backend != "gloo")
    throw ConfigError("LOCAL_RANK=" + std::to_string(local_rank) + " has no GPU of its own: this process sees " + gpus +
                      " (cuda:0 to cuda:" + std::to_string(visible_gpus - 1) + " after CUDA_VISIBLE_DEVICES); start at most " +
                      std::to_string(visible_gpus) + " workers on this node (--nproc-per-node auto), set "
                      "distributed.backend: gloo to let workers share GPUs (NCCL refuses two ranks on one GPU), or "
                      "set training.use_cpu: true");
  // On GPUs `auto` means nccl, as torchrun and HF's Trainer choose; gloo stays possible (through host memory).
  c.cuda_index = local_rank % visible_gpus;
  c.backend = backend == "gloo" ? "gloo" : "nccl";
  if (local_rank >= visible_gpus)
    c.sharing = "LOCAL_RANK=" + std::to_string(local_rank) + " shares " + c.device() + " with every worker whose "
                "LOCAL_RANK is " + std::to_string(c.cuda_index) + " modulo " + std::to_string(visible_gpus) +
                ": more workers than the " + gpus + " this process sees, dealt out round-robin (distributed.backend gloo)";
  return c;
}

std::string describe_device(const DeviceChoice& choice, const DeviceProbe& probe) {
  if (!choice.on_gpu()) return "cpu";
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(probe.gpu_total_memory(choice.cuda_index)) / 1073741824.0);
  return choice.device() + " (" + probe.gpu_name(choice.cuda_index) + ", " + memory + ")";
}

std::string describe_rank_devices(const std::vector<std::string>& per_rank) {
  if (per_rank.empty()) return "cpu";
  if (std::all_of(per_rank.begin(), per_rank.end(), [&](const std::string& d) { return d == per_rank.front(); }))
    return per_rank.front();
  std::string s;
  for (std::size_t r = 0; r < per_rank.size(); ++r) s += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + per_rank[r];
  return s;
}

}  // namespace hftrain
