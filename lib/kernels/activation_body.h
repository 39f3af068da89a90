// The GELU and SwiGLU kernels written once over a SIMD lane type V (kernels/simd_*.h); included by the per-ISA files,
// internal linkage throughout (see attention_body.h). Tails shorter than a lane go through the same code on a
// padded copy, so every element rounds alike.
#pragma once

#include <cstring>

#include "kernels/kernel_table.h"

namespace hftrain {
namespace kernels {
namespace {

template <class V>
struct GeluBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // Phi(x) and phi(x) (the standard normal's distribution and density). erfc(z), z = |x| / sqrt(2), from
  // Numerical Recipes' Chebyshev fit: t exp(-z^2 - 1.26551223 + t (1.00002368 + ...)), t = 1 / (1 + z / 2).
  static void normal(R x, R& cdf, R& pdf) {
    const R half = V::set1(0.5f), one = V::set1(1.0f);
    const R z = V::mul(V::mul(x, V::sign(x)), V::set1(0.70710678118654752f));
    const R t = V::div(one, V::fmadd(half, z, one));
    R poly = V::set1(0.17087277f);
    for (const float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                          0.37409196f, 1.00002368f, -1.26551223f})
      poly = V::fmadd(poly, t, V::set1(c));
    const R erfc = V::mul(t, V::exp(V::fnmadd(z, z, poly)));  // t e^(poly - z^2)
    const R tail = V::mul(half, erfc);                         // Phi(-|x|)
    cdf = V::where_negative(x, tail, V::fnmadd(half, erfc, one));
    pdf = V::mul(V::set1(0.39894228040143268f), V::exp(V::fnmadd(z, z, V::zero())));  // e^(-x^2/2) / sqrt(2 pi)
  }

  // s = 1 / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3); and du/dx.
  static void tanh_gate(R x, R& s, R& du) {
    const R one = V::set1(1.0f), k = V::set1(0.79788456080286536f), c = V::set1(0.044715f);
    const R x2 = V::mul(x, x);
    const R u = V::mul(k, V::fmadd(V::mul(c, x2), x, x));
    s = V::div(one, V::add(one, V::exp(V::mul(V::set1(-2.0f), u))));
    du = V::mul(k, V::fmadd(V::set1(3.0f * 0.044715f), x2, one));
  }

  static R forward_lane(R x, GeluForm form) {
    R a, b;
    if (form == GeluForm::kTanh) {
      tanh_gate(x, a, b);
      return V::mul(x, a);
    }
    normal(x, a, b);
    return V::mul(x, a);
  }

  static R backward_lane(R x, R dy, GeluForm form) {
    R a, b;
    if (form == GeluForm::kTanh) {  // s + x 2 s (1 - s) du/dx
      tanh_gate(x, a, b);
      const R one = V::set1(1.0f);
      const R ds = V::mul(V::mul(V::set1(2.0f), a), V::fnmadd(a, one, one));
      return V::mul(dy, V::fmadd(V::mul(x, ds), b, a));
    }
    normal(x, a, b);  // Phi + x phi
    return V::mul(dy, V::fmadd(x, b, a));
  }

  static void forward(const float* x, float* y, int64_t n, GeluForm form) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, forward_lane(V::load(x + i), form));
    if (i < n) {
      float in[W] = {}, out[W];
      std::memcpy(in, x + i, sizeof(float) * (n - i));
      V::store(out, forward_lane(V::load(in), form));
      std::memcpy(y + i, out, sizeof(float) * (n - i));
    }
  }

  static void backward(const float* x, const float* dy, float* dx, int64_t n, GeluForm form) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(dx + i, backward_lane(V::load(x + i), V::load(dy + i), form));
    if (i < n) {
      float in[W] = {}, g[W] = {}, out[W];
      std::memcpy(in, x + i, sizeof(float) * (n - i));
      std::memcpy(g, dy + i, sizeof(float) * (n - i));
      V::store(out, backward_lane(V::load(in), V::load(g), form));
      std::memcpy(dx + i, out, sizeof(float) * (n - i));
    }
  }
};

template <class V>
struct SwiGluBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  static R sigmoid(R g) {
    const R one = V::set1(1.0f);
    return V::div(one, V::add(one, V::exp(V::fnmadd(g, one, V::zero()))));  // 1 / (1 + e^-g)
  }

  static void forward(const float* g, const float* u, float* y, int64_t n) {
    int64_t i = 0;
    auto lane = [](R gv, R uv) { return V::mul(V::mul(gv, sigmoid(gv)), uv); };
    for (; i + W <= n; i += W) V::store(y + i, lane(V::load(g + i), V::load(u + i)));
    if (i < n) {
      float gs[W] = {}, us[W] = {}, out[W];
      std::memcpy(gs, g + i, sizeof(float) * (n - i));
      std::memcpy(us, u + i, sizeof(float) * (n - i));
      V::store(out, lane(V::load(gs), V::load(us)));
      std::memcpy(y + i, out, sizeof(float) * (n - i));
    }
  }

  static void backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n) {
    auto lane = [](R gv, R uv, R dyv, R& dgv, R& duv) {
      const R one = V::set1(1.0f), s = sigmoid(gv);
      const R silu = V::mul(gv, s);
      duv = V::mul(dyv, silu);
      // silu'(g) = s (1 + g (1 - s))
      dgv = V::mul(V::mul(dyv, uv), V::mul(s, V::fmadd(gv, V::fnmadd(s, one, one), one)));
    };
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      R a, b;
      lane(V::load(g + i), V::load(u + i), V::load(dy + i), a, b);
      V::store(dg + i, a);
      V::store(du + i, b);
    }
    if (i < n) {
      float gs[W] = {}, us[W] = {}, ds[W] = {}, a_out[W], b_out[W];
      std::memcpy(gs, g + i, sizeof(float) * (n - i));
      std::memcpy(us, u + i, sizeof(float) * (n - i));
      std::memcpy(ds, dy + i, sizeof(float) * (n - i));
      R a, b;
      lane(V::load(gs), V::load(us), V::load(ds), a, b);
      V::store(a_out, a);
      V::store(b_out, b);
      std::memcpy(dg + i, a_out, sizeof(float) * (n - i));
      std::memcpy(du + i, b_out, sizeof(float) * (n - i));
    }
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
