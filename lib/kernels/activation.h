// Fused GELU on the CPU, forward and backward in one pass each over contiguous fp32 elements, split over the
// intra-op threads: the exact form x Phi(x) (torch.nn.functional.gelu, HF "gelu") and the tanh form
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (HF "gelu_new", "gelu_pytorch_tanh"). The exact form takes
// Phi from erfc with relative accuracy (Numerical Recipes' erfcc, fractional error below 1.2e-7), so the
// negative tail keeps its digits; the tanh form is evaluated as x / (1 + e^(-2u)).
#pragma once

#include <cstdint>

namespace hftrain {
namespace kernels {

enum class GeluForm { kErf, kTanh };

void gelu_forward(const float* x, float* y, int64_t n, GeluForm form);
// dx = dy * gelu'(x)
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, GeluForm form);

}  // namespace kernels
}  // namespace hftrain
