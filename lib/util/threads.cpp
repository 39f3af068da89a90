// CPU thread policy (see threads.h).
#include "util/threads.h"

#include <dlfcn.h>
#include <sched.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "util/parallel.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string blas_kind() {
  using GetParallel = int (*)();
  auto fn = reinterpret_cast<GetParallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (!fn) return "other";
  switch (fn()) {
    case 0: return "openblas-sequential";
    case 1: return "openblas-pthread";
    case 2: return "openblas-openmp";
    default: return "other";
  }
}

}  // namespace

ThreadPlan choose_threads(int requested, int local_workers, double step_flops) {
  ThreadPlan plan;
  plan.blas = blas_kind();
  if (requested > 0) {
    plan.intra_op_threads = requested;
  } else if (plan.blas == "openblas-pthread") {
    plan.intra_op_threads = 1;
  } else {
    plan.intra_op_threads = std::max(1, available_cores() / std::max(1, local_workers));
    if (plan.intra_op_threads > 1 && step_flops > 0 && step_flops < kSmallStepFlops) {
      plan.intra_op_threads = 1;
      char mflop[32];
      std::snprintf(mflop, sizeof mflop, "%.1f", step_flops / 1e6);
      plan.reason = std::string("a micro-batch is ~") + mflop + " MFLOP, under the " +
                    std::to_string(static_cast<int>(kSmallStepFlops / 1e6)) +
                    " MFLOP where one thread measured faster than several";
    }
  }
  return plan;
}

void reexec_with_short_openmp_spin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run with libgomp's defaults
  ::unsetenv("GOMP_SPINCOUNT");
}

void apply_thread_plan(const ThreadPlan& plan) {
  at::set_num_threads(plan.intra_op_threads);
  sync_parallel_threads();
}

ThreadPlan configure_threads(int requested, int local_workers, double step_flops) {
  ThreadPlan plan = choose_threads(requested, local_workers, step_flops);
  apply_thread_plan(plan);
  return plan;
}

}  // namespace hftrain
