// CPU thread policy. Measured on 2 cores (README "Threads and BLAS"): with the OpenMP build of
// OpenBLAS, BLAS and LibTorch share one OpenMP pool, so intra-op threads = cores is fastest; with the
// pthread build, OpenBLAS keeps its own pool and any intra-op count > 1 oversubscribes (3-8x slower),
// so 1 intra-op thread is used.
#pragma once

#include <string>

namespace hftrain {

struct ThreadPlan {
  int intra_op_threads = 1;
  std::string blas;  // "openblas-openmp", "openblas-pthread", "openblas-sequential" or "other"
};

// `requested` > 0 wins; otherwise the policy above, for `local_workers` workers sharing the cores.
ThreadPlan choose_threads(int requested, int local_workers);

// Applies the plan to LibTorch and returns it.
ThreadPlan configure_threads(int requested, int local_workers);

}  // namespace hftrain
