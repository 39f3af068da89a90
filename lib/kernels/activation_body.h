// The GELU and SwiGLU kernels written once over a SIMD lane type V (kernels/simd_*.h); included by the per-ISA files,
// internal linkage throughout (see attention_body.h). Tails shorter than a lane go through the same code on a
// padded copy (map_lanes), so every element rounds alike.
#pragma once

#include <cstring>

#include "kernels/kernel_table.h"

namespace hftrain {
namespace kernels {
namespace {

// y[k][i] = fn(x[0][i], ...) over n elements of T (float, or bf16 bit patterns computed in fp32), a lane at a time;
// the tail through the same lane code on a zero-padded copy. fn(const R (&in)[In], R (&out)[Out]).
template <class V, int In, int Out, class T, class Fn>
void map_lanes(const T* const (&x)[In], T* const (&y)[Out], int64_t n, Fn fn) {
  using R = typename V::R;
  constexpr int64_t W = V::kWidth;
  R in[In], out[Out];
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    for (int k = 0; k < In; ++k) in[k] = load_lane<V>(x[k] + i);
    fn(in, out);
    for (int k = 0; k < Out; ++k) store_lane<V>(y[k] + i, out[k]);
  }
  if (i == n) return;
  T pad[W] = {}, res[W];
  for (int k = 0; k < In; ++k) {
    std::memcpy(pad, x[k] + i, sizeof(T) * (n - i));
    in[k] = load_lane<V>(pad);
  }
  fn(in, out);
  for (int k = 0; k < Out; ++k) {
    store_lane<V>(res, out[k]);
    std::memcpy(y[k] + i, res, sizeof(T) * (n - i));
  }
}

template <class V>
struct GeluBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // Phi(x), the standard normal's distribution. erfc(z), z = |x| / sqrt(2), from Numerical Recipes' Chebyshev
  // fit: t exp(-z^2 - 1.26551223 + t (1.00002368 + ...)), t = 1 / (1 + z / 2).
  static R normal_cdf(R x) {
    const R half = V::set1(0.5f), one = V::set1(1.0f);
    const R z = V::mul(V::abs(x), V::set1(0.70710678118654752f));
    const R t = V::reciprocal(V::fmadd(half, z, one));
    R poly = V::set1(0.17087277f);
    for (const float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                          0.37409196f, 1.00002368f, -1.26551223f})
      poly = V::fmadd(poly, t, V::set1(c));
    const R erfc = V::mul(t, V::exp(V::fnmadd(z, z, poly)));  // t e^(poly - z^2)
    return V::where_negative(x, V::mul(half, erfc), V::fnmadd(half, erfc, one));  // Phi(-|x|) or 1 - Phi(-|x|)
  }

  // The tanh form's gate s = 1 / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
  static R tanh_gate(R x) {
    const R one = V::set1(1.0f), k = V::set1(0.79788456080286536f), c = V::set1(0.044715f);
    const R u = V::mul(k, V::fmadd(V::mul(c, V::mul(x, x)), x, x));
    return V::reciprocal(V::add(one, V::exp(V::mul(V::set1(-2.0f), u))));
  }

  static R forward_lane(R x, GeluForm form) {
    return V::mul(x, form == GeluForm::kTanh ? tanh_gate(x) : normal_cdf(x));
  }

  // The gate g(x) from the forward's output y = x g: y / x, and g(0) = 1/2 where |x| is below twice the smallest
  // normal float (so that y, about x / 2 there, is normal too, also with denormals flushed to zero; y / x has g's
  // relative accuracy to within two roundings wherever y is a normal float).
  static R gate_from_output(R x, R y) {
    const R tiny = V::set1(2.3509887e-38f), one = V::set1(1.0f);
    return V::where_negative(V::fnmadd(one, tiny, V::abs(x)), V::set1(0.5f), V::mul(y, V::reciprocal(x)));
  }

  static R backward_lane(R x, R y, R dy, GeluForm form) {
    const R one = V::set1(1.0f), g = gate_from_output(x, y);
    if (form == GeluForm::kTanh) {  // s + x 2 s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3 0.044715 x^2)
      const R du = V::mul(V::set1(0.79788456080286536f), V::fmadd(V::set1(3.0f * 0.044715f), V::mul(x, x), one));
      const R ds = V::mul(V::mul(V::set1(2.0f), g), V::fnmadd(g, one, one));
      return V::mul(dy, V::fmadd(V::mul(x, ds), du, g));
    }
    // Phi + x phi, phi = e^(-x^2/2) / sqrt(2 pi)
    const R pdf = V::mul(V::set1(0.39894228040143268f), V::exp(V::mul(V::set1(-0.5f), V::mul(x, x))));
    return V::mul(dy, V::fmadd(x, pdf, g));
  }

  static void forward(const float* x, float* y, int64_t n, GeluForm form) {
    map_lanes<V, 1, 1>({x}, {y}, n, [form](const R (&in)[1], R (&out)[1]) { out[0] = forward_lane(in[0], form); });
  }

  static void backward(const float* x, const float* y, const float* dy, float* dx, int64_t n, GeluForm form) {
    map_lanes<V, 3, 1>({x, y, dy}, {dx}, n,
                       [form](const R (&in)[3], R (&out)[1]) { out[0] = backward_lane(in[0], in[1], in[2], form); });
  }

  // bf16 elements, computed in fp32 and rounded once. Backward evaluates the gate again from x (the bf16 output
  // would give it only to bf16's 8 bits).
  static void forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form) {
    map_lanes<V, 1, 1>({x}, {y}, n, [form](const R (&in)[1], R (&out)[1]) { out[0] = forward_lane(in[0], form); });
  }

  static void backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form) {
    map_lanes<V, 2, 1>({x, dy}, {dx}, n, [form](const R (&in)[2], R (&out)[1]) {
      out[0] = backward_lane(in[0], forward_lane(in[0], form), in[1], form);
    });
  }
};

template <class V>
struct SwiGluBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  static R sigmoid(R g) {
    const R one = V::set1(1.0f);
    return V::reciprocal(V::add(one, V::exp(V::fnmadd(g, one, V::zero()))));  // 1 / (1 + e^-g)
  }

  static void forward(const float* g, const float* u, float* y, int64_t n) {
    map_lanes<V, 2, 1>({g, u}, {y}, n, [](const R (&in)[2], R (&out)[1]) {
      out[0] = V::mul(V::mul(in[0], sigmoid(in[0])), in[1]);  // silu(g) u
    });
  }

  static void backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n) {
    map_lanes<V, 3, 2>({g, u, dy}, {dg, du}, n, [](const R (&in)[3], R (&out)[2]) {
      const R one = V::set1(1.0f), s = sigmoid(in[0]);
      out[1] = V::mul(in[2], V::mul(in[0], s));  // du = dy silu(g)
      // dg = dy u silu'(g), silu'(g) = s (1 + g (1 - s))
      out[0] = V::mul(V::mul(in[2], in[1]), V::mul(s, V::fmadd(in[0], V::fnmadd(s, one, one), one)));
    });
  }

  // bf16 tensors, rounded where LibTorch's bf16 `silu(g) * u` rounds: silu(g) to bf16, then the product; backward
  // as its autograd does: the product's gradients dy u and dy silu(g) each rounded, then silu's backward from the
  // rounded dy u (each op computes in fp32 from its bf16 inputs and rounds its output once).
  static void forward_bf16(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n) {
    map_lanes<V, 2, 1>({g, u}, {y}, n, [](const R (&in)[2], R (&out)[1]) {
      out[0] = V::mul(round_to_bf16<V>(V::mul(in[0], sigmoid(in[0]))), in[1]);
    });
  }

  static void backward_bf16(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du, int64_t n) {
    map_lanes<V, 3, 2>({g, u, dy}, {dg, du}, n, [](const R (&in)[3], R (&out)[2]) {
      const R one = V::set1(1.0f), s = sigmoid(in[0]);
      out[1] = V::mul(in[2], round_to_bf16<V>(V::mul(in[0], s)));  // du = dy silu(g)
      const R d_silu = round_to_bf16<V>(V::mul(in[2], in[1]));      // the product's gradient towards silu(g)
      out[0] = V::mul(d_silu, V::mul(s, V::fmadd(in[0], V::fnmadd(s, one, one), one)));
    });
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
