// Whether the models use the fused kernels at all (HFTRAIN_KERNELS unset or "fused"; "torch" = LibTorch's ops,
// for comparison; read once; tests switch it to compare both paths in one process), and which instruction set
// the model kernels (attention, GELU) run on: the best this CPU runs, unless HFTRAIN_KERNEL_ISA names another
// (scalar, avx2, avx512) or a test forces one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {
namespace kernels {

bool fused_kernels_enabled();
void set_fused_kernels_enabled(bool on);

std::string model_kernel_isa();                  // the one in use
std::vector<std::string> model_kernel_isas();     // those this CPU and build have
void set_model_kernel_isa(const std::string& name);  // tests: force one ("" = automatic)

// How many times the models have taken each fused kernel (a comparison with the LibTorch ops checks that it
// really ran them); relaxed atomic counters, free beside a kernel call.
enum class FusedKernel { kAttention, kLayerNorm, kRmsNorm, kGelu, kSwiGlu, kCrossEntropy, kBf16Linear, kEmbedding, kResidualAdd, kRotary,
                         kVarlenAttention, kGqaAttention /* LibTorch 2.x entries, models/dispatched_attention */, kCount };
void count_fused_call(FusedKernel kernel);
int64_t fused_calls(FusedKernel kernel);

}  // namespace kernels
}  // namespace hftrain
