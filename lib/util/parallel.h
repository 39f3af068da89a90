// Splitting a range of work over LibTorch's intra-op threads -- the OpenMP pool its BLAS and ops use -- for
// hftrain's own kernels (model kernels, optimizer kernels, quantization). at::parallel_for cannot do it from
// hftrain's sources: it is a header template whose OpenMP region exists only in files compiled with OpenMP,
// and without it runs the whole range on the calling thread. util/parallel.cpp is the one file compiled with
// OpenMP; this header keeps torch and OpenMP out of its includers.
#pragma once

#include <cstdint>

namespace hftrain {

using RangeBody = void (*)(const void* context, int64_t begin, int64_t end);
void parallel_range_impl(int64_t begin, int64_t end, int64_t grain, RangeBody body, const void* context);

// Calls fn(begin_k, end_k) on consecutive pieces of [begin, end), one per thread, as at::parallel_for does:
// at most one piece per `grain` items, and on the calling thread alone when the range is not larger than
// `grain`, one thread is set, or it is called from inside a parallel region. The first exception thrown by
// any piece is rethrown here after all pieces finish.
template <class Fn>
void parallel_range(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  parallel_range_impl(
      begin, end, grain, [](const void* c, int64_t b, int64_t e) { (*static_cast<const Fn*>(c))(b, e); }, &fn);
}

// Sets the thread count of hftrain's regions to LibTorch's (at::set_num_threads has been called). Needed when
// LibTorch carries its own OpenMP runtime (the PyTorch wheels bundle one); with the system's, it is the same.
void sync_parallel_threads();

// Threads a region of parallel_range uses now (1 when OpenMP is not compiled in).
int parallel_threads();

}  // namespace hftrain
