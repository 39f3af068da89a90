// Worker environment parsing (see env.h).
#include "distributed/env.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "util/error.h"

namespace hftrain {
namespace {

int parse_int(const std::string& name, const std::string& text, int min_value, int max_value) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw ConfigError("environment variable " + name + "='" + text + "' is not an integer");
  if (v < min_value || v > max_value)
    throw ConfigError("environment variable " + name + "=" + text + " is out of range [" + std::to_string(min_value) +
                      ", " + std::to_string(max_value) + "]");
  return static_cast<int>(v);
}

// SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE look like "4" or "4(x2),3": the first count applies
// to the first nodes, which is where SLURM_LOCALID counts from.
int parse_slurm_tasks_per_node(const std::string& name, const std::string& text) {
  std::string head = text.substr(0, text.find_first_of("(,"));
  return parse_int(name, head, 1, 1 << 20);
}

// torch sets str(True) / str(False); the usual spellings of a flag are accepted too.
bool parse_flag(const std::string& name, const std::string& text) {
  if (text == "True" || text == "true" || text == "1") return true;
  if (text == "False" || text == "false" || text == "0") return false;
  throw ConfigError("environment variable " + name + "='" + text + "' is not True or False");
}

}  // namespace

bool process_env(const std::string& name, std::string& value) {
  const char* v = std::getenv(name.c_str());
  if (!v) return false;
  value = v;
  return true;
}

std::string DistEnv::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local rank " +
         std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ", rendezvous " + master_addr + ":" +
         std::to_string(master_port) + (agent_store ? " (torchrun's agent store)" : "") + ", from " + source + ")";
}

DistEnv detect_dist_env(const EnvLookup& lookup) {
  DistEnv env;
  std::string v;
  auto get = [&](const std::string& name) -> bool { return lookup(name, v) && !v.empty(); };
  const bool torchrun = get("RANK") || get("WORLD_SIZE");
  const bool slurm = !torchrun && get("SLURM_PROCID") && (get("SLURM_STEP_ID") || get("SLURM_STEPID"));
  if (!torchrun && !slurm) return env;

  if (torchrun) {
    env.source = "torchrun";
    if (!get("RANK")) throw ConfigError("environment: WORLD_SIZE is set but RANK is not (both are needed for a worker)");
    env.rank = parse_int("RANK", v, 0, 1 << 20);
    if (!get("WORLD_SIZE")) throw ConfigError("environment: RANK is set but WORLD_SIZE is not (both are needed for a worker)");
    env.world_size = parse_int("WORLD_SIZE", v, 1, 1 << 20);
    if (get("LOCAL_RANK")) env.local_rank = parse_int("LOCAL_RANK", v, 0, 1 << 20);
    // Without LOCAL_WORLD_SIZE, assume every worker shares this node (the conservative thread split).
    env.local_world_size = get("LOCAL_WORLD_SIZE") ? parse_int("LOCAL_WORLD_SIZE", v, 1, 1 << 20) : env.world_size;
    if (get("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = parse_flag("TORCHELASTIC_USE_AGENT_STORE", v);
  } else {
    env.source = "slurm";
    get("SLURM_PROCID");
    env.rank = parse_int("SLURM_PROCID", v, 0, 1 << 20);
    if (!get("SLURM_NTASKS")) throw ConfigError("environment: SLURM_PROCID is set but SLURM_NTASKS is not");
    env.world_size = parse_int("SLURM_NTASKS", v, 1, 1 << 20);
    if (get("SLURM_LOCALID")) env.local_rank = parse_int("SLURM_LOCALID", v, 0, 1 << 20);
    if (get("SLURM_NTASKS_PER_NODE"))
      env.local_world_size = parse_slurm_tasks_per_node("SLURM_NTASKS_PER_NODE", v);
    else if (get("SLURM_TASKS_PER_NODE"))
      env.local_world_size = parse_slurm_tasks_per_node("SLURM_TASKS_PER_NODE", v);
    else
      env.local_world_size = env.local_rank + 1;
    if (!get("MASTER_ADDR"))
      throw ConfigError("environment: a SLURM job step needs MASTER_ADDR (export it in the job script, e.g. the first "
                        "host of `scontrol show hostnames $SLURM_JOB_NODELIST`)");
  }
  if (get("MASTER_ADDR")) env.master_addr = v;
  else if (env.world_size > 1) throw ConfigError("environment: RANK/WORLD_SIZE are set but MASTER_ADDR is not");
  if (get("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", v, 1, 65535);
  else if (torchrun && env.world_size > 1) throw ConfigError("environment: RANK/WORLD_SIZE are set but MASTER_PORT is not");
  if (torchrun && get("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", v, 0, 1 << 20);
  else if (get("HFTRAIN_RESTART_COUNT"))
    env.restart_count = parse_int("HFTRAIN_RESTART_COUNT", v, 0, 1 << 20);

  const std::string rank_var = torchrun ? "RANK" : "SLURM_PROCID";
  if (env.rank >= env.world_size)
    throw ConfigError("environment: " + rank_var + "=" + std::to_string(env.rank) + " is not below the world size " +
                      std::to_string(env.world_size));
  if (env.local_rank >= env.local_world_size)
    throw ConfigError("environment: the local rank " + std::to_string(env.local_rank) +
                      " is not below the local world size " + std::to_string(env.local_world_size));
  if (env.local_world_size > env.world_size)
    throw ConfigError("environment: the local world size " + std::to_string(env.local_world_size) +
                      " exceeds the world size " + std::to_string(env.world_size));
  return env;
}

std::string job_token_from_env(const EnvLookup& lookup) {
  std::string v;
  return lookup(kJobTokenVariable, v) ? v : std::string();
}

std::string new_job_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {0};
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw RuntimeFailure("launcher: cannot read /dev/urandom for the job token");
  std::string out;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    out += buf;
  }
  return out;
}

}  // namespace hftrain
