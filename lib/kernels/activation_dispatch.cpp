// Runs the GELU and SwiGLU kernels over the intra-op threads in blocks of 16K elements.
#include "kernels/kernel_table.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

constexpr int64_t kBlock = 16384;

}  // namespace

void gelu_forward(const float* x, float* y, int64_t n, GeluForm form) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock, [&](int64_t begin, int64_t end) { t->gelu_forward(x + begin, y + begin, end - begin, form); });
}

void gelu_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n, GeluForm form) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock,
                   [&](int64_t begin, int64_t end) { t->gelu_backward(x + begin, y + begin, dy + begin, dx + begin, end - begin, form);
                   });
}

void gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock, [&](int64_t begin, int64_t end) { t->gelu_forward_bf16(x + begin, y + begin, end - begin, form); });
}

void gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock,
                 [&](int64_t begin, int64_t end) { t->gelu_backward_bf16(x + begin, dy + begin, dx + begin, end - begin, form); });
}

void swiglu_forward(const float* g, const float* u, float* y, int64_t n) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock, [&](int64_t begin, int64_t end) { t->swiglu_forward(g + begin, u + begin, y + begin, end - begin); });
}

void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock, [&](int64_t begin, int64_t end) {
    t->swiglu_backward(g + begin, u + begin, dy + begin, dg + begin, du + begin, end - begin);
  });
}

void swiglu_forward_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock,
                 [&](int64_t begin, int64_t end) { t->swiglu_forward_bf16(g + begin, u + begin, y + begin, end - begin); });
}

void swiglu_backward_bf16(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du, int64_t n) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, n, kBlock, [&](int64_t begin, int64_t end) {
    t->swiglu_backward_bf16(g + begin, u + begin, dy + begin, dg + begin, du + begin, end - begin);
  });
}

}  // namespace kernels
}  // namespace hftrain
