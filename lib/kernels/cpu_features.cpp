// The CPU's instruction sets for the kernel tables (see cpu_features.h).
#include "kernels/cpu_features.h"

namespace hftrain {
namespace simd {

bool cpu_runs(const std::string& name) {
#if defined(__x86_64__) || defined(__i386__)
  if (name == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx2");
  if (name == "avx2+fma") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return true;  // scalar; NEON is compiled only for AArch64, where it is always present
}

}  // namespace simd
}  // namespace hftrain
