// parallel_range over OpenMP (see parallel.h). The only file of lib/ compiled with -fopenmp (lib/CMakeLists.txt);
// it links the OpenMP runtime LibTorch uses, so that the kernels share one pool with BLAS and LibTorch's ops.
#include "util/parallel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace hftrain {

void parallel_range_impl(int64_t begin, int64_t end, int64_t grain, RangeBody body, const void* context) {
  if (begin >= end) return;
  const int64_t items = end - begin;
#ifdef _OPENMP
  at::internal::lazy_init_num_threads();  // a thread's first region: LibTorch's count, as at::parallel_for
  const bool parallel = items > grain && items > 1 && at::get_num_threads() > 1 && !at::in_parallel_region() &&
                        !omp_in_parallel();
#else
  const bool parallel = false;
#endif
  if (!parallel) {
    body(context, begin, end);
    return;
  }
#ifdef _OPENMP
  std::atomic_flag failed = ATOMIC_FLAG_INIT;
  std::exception_ptr error;
  // As at::parallel_for: the team is the pool's size (no num_threads clause, which makes GOMP rebuild its
  // pool when the count changes); pieces are at least `grain` items.
#pragma omp parallel
  {
    int64_t pieces = omp_get_num_threads();
    if (grain > 0) pieces = std::min(pieces, (items + grain - 1) / grain);
    const int64_t size = (items + pieces - 1) / pieces;
    const int64_t first = begin + omp_get_thread_num() * size;
    if (first < end) {
      try {
        body(context, first, std::min(end, first + size));
      } catch (...) {
        if (!failed.test_and_set()) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
#endif
}

void sync_parallel_threads() {
#ifdef _OPENMP
  omp_set_num_threads(std::max(1, at::get_num_threads()));
#endif
}

int parallel_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace hftrain
