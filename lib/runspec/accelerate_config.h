// Accelerate config files (`accelerate launch --config_file FILE`, the YAML `accelerate config` writes) as
// hftrain reads them: `distributed.accelerate_config: FILE` in the spec or `hftrain train --accelerate-config
// FILE`. Every key of Accelerate's ClusterConfig (and of its deepspeed_config / fsdp_config blocks) is
// mapped onto a spec setting, accepted with a one-line reason, or refused with a reason; an unknown key is
// an error with did-you-mean at file:line. Spec settings are placed with their origin (a conflict with the
// spec is reported, the command line wins); the launch settings (nodes, node rank, rendezvous address,
// GPU ids) are kept here for the launcher, where the command line's flags win over them. No LibTorch.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"

namespace hftrain {

// The launch settings of an Accelerate config (torchrun's options as accelerate launch sets them).
struct AccelerateLaunch {
  std::string source;                     // the config file; "" = none given
  std::optional<int> nnodes;              // num_machines
  std::optional<int> node_rank;           // machine_rank
  std::optional<std::string> master_addr; // main_process_ip
  std::optional<int> master_port;         // main_process_port (absent or 0 = a free port on one node)
  std::string rdzv_backend = "static";    // static or c10d: both meet at node 0's address here
  std::optional<std::string> gpu_ids;     // CUDA_VISIBLE_DEVICES of the workers ("all" = not restricted)
  // Each setting above that the file wrote -> "accelerate <key>: <value> (file:line:col)".
  std::map<std::string, std::string> origins;
  bool present() const { return !source.empty(); }
};

// The spec key that names the file.
inline const char* const kAccelerateConfigKey = "distributed.accelerate_config";

// Before the sections are parsed (after the HF names are moved, before training.deepspeed is read): reads
// root's distributed.accelerate_config, removes it, checks every key of the file and places its settings
// into root's sections (deepspeed_config_file becomes training.deepspeed). Problems go to `issues` located
// in the Accelerate file; `notes` receives one line per key accepted without effect.
void apply_accelerate_config(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                             std::vector<std::string>& notes, AccelerateLaunch& out);

}  // namespace hftrain
