// The CPU's instruction sets for the kernel tables (see cpu_features.h).
#include "kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

bool cpu_has_bf16_gemm() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  bool amx = false, avx512_bf16 = false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) amx = (edx >> 22) & 1u;  // AMX-BF16
  if (eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) avx512_bf16 = (eax >> 5) & 1u;  // AVX512_BF16
  return amx || avx512_bf16;
#else
  return true;
#endif
}

}  // namespace simd
}  // namespace hftrain
