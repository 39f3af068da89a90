// Fused GELU and SwiGLU on the CPU, forward and backward in one pass each over contiguous fp32 elements, split over the
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
// dx = dy * gelu'(x), given the forward's output y = x g(x) too (g = Phi, or the tanh form's gate): g is read
// back as y / x (1/2 at x = 0), so backward evaluates no erfc (and the tanh form no exponential) again.
void gelu_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n, GeluForm form);
// The same over bf16 elements (bit patterns): computed in fp32, each output rounded once; backward from x alone
// (the gate evaluated again, not read from the bf16 output).
void gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form);
void gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form);

// SwiGLU's product (Llama's MLP): y = silu(g) u, silu(g) = g / (1 + e^-g); and its backward
// dg = dy u silu'(g), du = dy silu(g).
void swiglu_forward(const float* g, const float* u, float* y, int64_t n);
void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n);
// The same over bf16 elements (bit patterns), rounded where LibTorch's bf16 silu(g) * u and its autograd round:
// silu(g) to bf16 before the product; backward rounds dy u before silu's backward, and each output once.
void swiglu_forward_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n);
void swiglu_backward_bf16(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du, int64_t n);

}  // namespace kernels
}  // namespace hftrain
