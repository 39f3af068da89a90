// Runs the 4-bit dequantisation (quant4bit.h) on the model kernels' instruction set (kernel_choice.h: the best
// this CPU runs, or HFTRAIN_KERNEL_ISA's) over the intra-op threads, in pieces of 32K elements.
#include "kernels/kernel_table.h"
#include "kernels/quant4bit.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

constexpr int64_t kDequant4PieceElements = 1 << 15;

}  // namespace

void dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                     int64_t end, float* out) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(begin, end, kDequant4PieceElements, [&](int64_t i0, int64_t i1) {
    t->dequantize_4bit(packed, absmax, code, block, i0, i1, out + (i0 - begin));
  });
}

void dequantize_4bit_bf16(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                          int64_t end, uint16_t* out) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(begin, end, kDequant4PieceElements, [&](int64_t i0, int64_t i1) {
    t->dequantize_4bit_bf16(packed, absmax, code, block, i0, i1, out + (i0 - begin));
  });
}

}  // namespace kernels
}  // namespace hftrain
