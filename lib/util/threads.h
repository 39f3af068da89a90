// CPU thread policy. Measured on 2 cores (README "Threads and BLAS"): with the OpenMP build of
// OpenBLAS, BLAS and LibTorch share one OpenMP pool, so intra-op threads = cores is fastest; with the
// pthread build, OpenBLAS keeps its own pool and any intra-op count > 1 oversubscribes (3-8x slower),
// so 1 intra-op thread is used. Small steps are the exception: a parallel region costs a fork/join
// (oneDNN's GELU and nll_loss_backward open one at any size), and waking the partner thread costs an
// inter-processor interrupt, so below kSmallStepFlops per micro-batch one thread is faster (README).
#pragma once

#include <string>

namespace hftrain {

struct ThreadPlan {
  int intra_op_threads = 1;
  std::string blas;    // "openblas-openmp", "openblas-pthread", "openblas-sequential" or "other"
  std::string reason;  // why a small step got 1 thread; empty otherwise
};

// Work of one micro-batch (forward + backward, 6 x parameters x tokens, or 2 x for forward only) under
// which the automatic policy uses 1 intra-op thread. Measured with the mlp classifier, 2 cores, OpenMP
// OpenBLAS, 1 vs 2 threads: 1 MFLOP/step 1.45x faster with 1, 27 MFLOP about even (1.05x), 210 MFLOP
// 1.22x faster with 2, 1.6 GFLOP 1.5x faster with 2.
inline constexpr double kSmallStepFlops = 32e6;

// `requested` > 0 wins; otherwise the policy above, for `local_workers` workers sharing the cores and a
// step of `step_flops` (0 = not known yet: no small-step rule).
ThreadPlan choose_threads(int requested, int local_workers, double step_flops = 0);

// OpenMP threads that finish a parallel region spin for GOMP's default 300,000 iterations before they
// sleep. When the cores are shared (ctest -j, several workers, other jobs) a spinning thread steals the
// core its partner needs, and small-op workloads ran 10-15x slower (README "Threads and BLAS"). libgomp
// reads GOMP_SPINCOUNT / OMP_WAIT_POLICY only once, when it is loaded, before main(). So when neither is
// set, this re-executes the program (same pid, arguments and environment) with GOMP_SPINCOUNT set to
// kOpenMpSpinCount; with either set by the user it does nothing. Returns only when no re-exec happened.
inline constexpr const char* kOpenMpSpinCount = "1000";
void reexec_with_short_openmp_spin(char** argv);

// Sets LibTorch's intra-op thread count to the plan's.
void apply_thread_plan(const ThreadPlan& plan);

// choose_threads, then apply_thread_plan; returns the plan.
ThreadPlan configure_threads(int requested, int local_workers, double step_flops = 0);

}  // namespace hftrain
