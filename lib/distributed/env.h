// Process layout of a worker: which rank it is and where the rendezvous lives. Read from the
// environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// and TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT when its elastic agent hosts the store),
// which is also what `hftrain train --nproc-per-node N` gives its workers, or from a SLURM job step
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE, with MASTER_ADDR exported by the
// job script). No LibTorch here: the launcher and the CLI include it.
#pragma once

#include <functional>
#include <string>

namespace hftrain {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;        // TORCHELASTIC_RESTART_COUNT or HFTRAIN_RESTART_COUNT: restarts of the job so far
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's elastic agent hosts a torch TCPStore at
  // MASTER_ADDR:MASTER_PORT and every rank, rank 0 included, joins it as a client.
  bool agent_store = false;
  std::string source = "none";  // "none" (plain process), "torchrun" (RANK/WORLD_SIZE...) or "slurm"

  // True when this process is one worker of a launched job (even a job of one worker).
  bool is_worker() const { return source != "none"; }
  std::string describe() const;
};

// Looks up an environment variable; empty optional-like "" with found=false when unset.
using EnvLookup = std::function<bool(const std::string& name, std::string& value)>;
bool process_env(const std::string& name, std::string& value);

// Reads the layout. torchrun variables win over SLURM ones; SLURM is used only inside a job step
// (SLURM_STEP_ID set), so an sbatch script that runs the launcher itself is not mistaken for a worker.
// Malformed or inconsistent values raise ConfigError naming the variable.
DistEnv detect_dist_env(const EnvLookup& lookup = process_env);

// The variable that carries the job token (torchrun's rdzv id idea): only workers that present it may
// join the rendezvous. The launcher of a single-node job generates one; a multi-node job sets the same
// value on every node.
inline constexpr const char* kJobTokenVariable = "HFTRAIN_RDZV_TOKEN";
// The job token from the environment ("" when unset) and a fresh random one (32 hex digits).
std::string job_token_from_env(const EnvLookup& lookup = process_env);
std::string new_job_token();

}  // namespace hftrain
