// Which of the SIMD lanes (kernels/simd_*.h) this CPU runs: one answer for every kernel table (the optimizer
// updates, the model kernels), by the lane's name ("avx512", "avx2+fma", "neon", "scalar").
#pragma once

#include <string>

namespace hftrain {
namespace simd {

bool cpu_runs(const std::string& isa_name);

// Whether this CPU multiplies bf16 in hardware (x86: AVX512-BF16 or AMX-BF16; other architectures are taken to).
// Without it oneDNN emulates bf16 GEMMs, measured 3-4.5x slower than fp32 ones (bench/RESULTS.md).
bool cpu_has_bf16_gemm();

}  // namespace simd
}  // namespace hftrain
