// HFTRAIN_FAULT_INJECT parsing and hooks (see fault_injection.h).
#include "util/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "util/error.h"

namespace hftrain {
namespace fault {
namespace {

struct Plan {
  long long kill_at = 0;    // save:<k>
  long long enospc_at = 0;  // enospc:<k>
  long long eacces_at = 0;  // eacces:<k>
  long long delay_ms = 0;   // step_delay_ms:<m>
  long long generate_delay_ms = 0;  // generate_delay_ms:<m>
  bool trace = false;
  bool skip_rng = false;
  long long steps = 0;      // write steps seen so far
  std::set<long long> overflow_at;  // overflow:<k> (may repeat)
  long long optimizer_steps = 0;    // mixed-precision optimizer steps seen so far
  long long aio_eio_at = 0, aio_enospc_at = 0;  // aio_eio:<k>, aio_enospc:<k>
  long long aio_requests = 0;                   // asynchronous I/O requests seen so far
  long long swap_free = -1;                     // swap_free_bytes:<n>
};

long long parse_count(const std::string& item, const std::string& value) {
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < 0)
    throw ConfigError("HFTRAIN_FAULT_INJECT: '" + item + "' needs a non-negative integer");
  return v;
}

Plan parse(const char* text) {
  Plan p;
  if (!text) return p;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    const std::string key = item.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : item.substr(colon + 1);
    if (key == "save") p.kill_at = parse_count(item, value);
    else if (key == "enospc") p.enospc_at = parse_count(item, value);
    else if (key == "eacces") p.eacces_at = parse_count(item, value);
    else if (key == "step_delay_ms") p.delay_ms = parse_count(item, value);
    else if (key == "generate_delay_ms") p.generate_delay_ms = parse_count(item, value);
    else if (key == "trace") p.trace = true;
    else if (key == "skip_rng_restore") p.skip_rng = true;
    else if (key == "overflow") p.overflow_at.insert(parse_count(item, value));
    else if (key == "aio_eio") p.aio_eio_at = parse_count(item, value);
    else if (key == "aio_enospc") p.aio_enospc_at = parse_count(item, value);
    else if (key == "swap_free_bytes") p.swap_free = parse_count(item, value);
    else
      throw ConfigError("HFTRAIN_FAULT_INJECT: unknown item '" + item +
                        "' (known: save:<k>, enospc:<k>, eacces:<k>, trace, step_delay_ms:<m>, generate_delay_ms:<m>, skip_rng_restore, "
                        "overflow:<k>, aio_eio:<k>, aio_enospc:<k>, swap_free_bytes:<n>)");
  }
  return p;
}

Plan& plan() {
  static Plan p = parse(std::getenv("HFTRAIN_FAULT_INJECT"));
  return p;
}

}  // namespace

int write_step(const std::string& what) {
  Plan& p = plan();
  const long long n = ++p.steps;
  if (p.trace) std::cerr << "fault-inject: write step " << n << ": " << what << std::endl;
  if (p.kill_at == n) {
    std::cerr << "fault-inject: SIGKILL at write step " << n << " (" << what << ")" << std::endl;
    ::kill(::getpid(), SIGKILL);
    ::pause();
  }
  if (p.enospc_at == n) return ENOSPC;
  if (p.eacces_at == n) return EACCES;
  return 0;
}

void after_optimizer_step() {
  const long long ms = plan().delay_ms;
  if (ms <= 0) return;
  std::cerr << "fault-inject: step delay " << ms << " ms" << std::endl;  // tests count these lines
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void inside_generation_batch() {
  const long long ms = plan().generate_delay_ms;
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool skip_rng_restore() { return plan().skip_rng; }

int aio_request() {
  Plan& p = plan();
  const long long n = ++p.aio_requests;
  if (p.aio_eio_at == n) return EIO;
  if (p.aio_enospc_at == n) return ENOSPC;
  return 0;
}

long long swap_free_bytes() { return plan().swap_free; }

bool forced_overflow() {
  Plan& p = plan();
  const long long n = ++p.optimizer_steps;
  if (!p.overflow_at.count(n)) return false;
  std::cerr << "fault-inject: gradient overflow forced at optimizer step " << n << std::endl;
  return true;
}

}  // namespace fault
}  // namespace hftrain
