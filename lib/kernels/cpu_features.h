// Which of the SIMD lanes (kernels/simd_*.h) this CPU runs: one answer for every kernel table (the optimizer
// updates, the model kernels), by the lane's name ("avx512", "avx2+fma", "neon", "scalar").
#pragma once

#include <string>

namespace hftrain {
namespace simd {

bool cpu_runs(const std::string& isa_name);

}  // namespace simd
}  // namespace hftrain
