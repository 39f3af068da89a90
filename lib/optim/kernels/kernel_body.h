// The optimizer updates written once over a SIMD lane type V (simd_*.h): V::kWidth elements per step, the
// tail through the same vector code on a padded copy (so every element rounds alike). The CUDA kernels
// (optim/kernels/cuda/) apply the same bodies over the scalar lane, one element per thread (HFTRAIN_HD). Included by one .cpp
// per instruction set, each compiled with its own target flags; everything here has internal linkage so
// that no function compiled for one ISA can be picked by the linker for another.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"
#include "optim/kernels/kernel_table.h"

namespace hftrain {
namespace optim_kernels {
namespace {

enum class Out { kNone, kBF16, kF16 };

struct Ptrs {
  float* param;
  const void* grad;
  uint16_t* out16;
  float* s0;  // first state slot (exp_avg, momentum buffer, state_sum)
  float* s1;  // second state slot (exp_avg_sq)
};

template <class V, ElementType G>
HFTRAIN_HD typename V::R load_grad(const void* g, int64_t i, typename V::R scale) {
  if constexpr (G == ElementType::kF32) return V::mul(V::load(static_cast<const float*>(g) + i), scale);
  else if constexpr (G == ElementType::kBF16) return V::mul(V::load_bf16(static_cast<const uint16_t*>(g) + i), scale);
  else return V::mul(V::load_fp16(static_cast<const uint16_t*>(g) + i), scale);
}

template <class V, Out O>
HFTRAIN_HD void store_param(const Ptrs& p, int64_t i, typename V::R w) {
  V::store(p.param + i, w);
  if constexpr (O == Out::kBF16) V::store_bf16(p.out16 + i, w);
  else if constexpr (O == Out::kF16) V::store_fp16(p.out16 + i, w);
}

struct AdamOp {
  using Coef = AdamCoef;
  template <class V, ElementType G, Out O>
  HFTRAIN_HD static void apply(const Ptrs& p, int64_t i, float scale, const Coef& c) {
    using R = typename V::R;
    R g = load_grad<V, G>(p.grad, i, V::set1(scale));
    const R w = V::load(p.param + i);
    if (c.l2 != 0.0f) g = V::fmadd(V::set1(c.l2), w, g);  // Adam: g + wd*p
    const R param = V::mul(w, V::set1(c.decay));          // AdamW: p * (1 - lr*wd)
    const R m = V::fmadd(V::set1(c.one_minus_beta1), g, V::mul(V::load(p.s0 + i), V::set1(c.beta1)));
    const R v = V::fmadd(V::mul(V::set1(c.one_minus_beta2), g), g, V::mul(V::load(p.s1 + i), V::set1(c.beta2)));
    V::store(p.s0 + i, m);
    V::store(p.s1 + i, v);
    const R denom = V::fmadd(V::sqrt(v), V::set1(c.inv_bias_correction2_sqrt), V::set1(c.eps));
    store_param<V, O>(p, i, V::fnmadd(V::set1(c.step_size), V::div(m, denom), param));
  }
};

struct SgdOp {
  using Coef = SgdCoef;
  template <class V, ElementType G, Out O>
  HFTRAIN_HD static void apply(const Ptrs& p, int64_t i, float scale, const Coef& c) {
    using R = typename V::R;
    R d = load_grad<V, G>(p.grad, i, V::set1(scale));
    const R w = V::load(p.param + i);
    if (c.weight_decay != 0.0f) d = V::fmadd(V::set1(c.weight_decay), w, d);
    if (p.s0 != nullptr) {
      const R buf = c.first ? d
                            : V::fmadd(V::set1(c.one_minus_dampening), d, V::mul(V::load(p.s0 + i), V::set1(c.momentum)));
      V::store(p.s0 + i, buf);
      d = c.nesterov ? V::fmadd(V::set1(c.momentum), buf, d) : buf;
    }
    store_param<V, O>(p, i, V::fnmadd(V::set1(c.lr), d, w));
  }
};

struct LionOp {
  using Coef = LionCoef;
  template <class V, ElementType G, Out O>
  HFTRAIN_HD static void apply(const Ptrs& p, int64_t i, float scale, const Coef& c) {
    using R = typename V::R;
    const R g = load_grad<V, G>(p.grad, i, V::set1(scale));
    const R m = V::load(p.s0 + i);
    const R direction = V::sign(V::fmadd(V::set1(c.one_minus_beta1), g, V::mul(m, V::set1(c.beta1))));
    const R w = V::mul(V::load(p.param + i), V::set1(c.decay));
    V::store(p.s0 + i, V::fmadd(V::set1(c.one_minus_beta2), g, V::mul(m, V::set1(c.beta2))));
    store_param<V, O>(p, i, V::fnmadd(V::set1(c.lr), direction, w));
  }
};

struct AdagradOp {
  using Coef = AdagradCoef;
  template <class V, ElementType G, Out O>
  HFTRAIN_HD static void apply(const Ptrs& p, int64_t i, float scale, const Coef& c) {
    using R = typename V::R;
    R g = load_grad<V, G>(p.grad, i, V::set1(scale));
    const R w = V::load(p.param + i);
    if (c.weight_decay != 0.0f) g = V::fmadd(V::set1(c.weight_decay), w, g);
    const R sum = V::fmadd(g, g, V::load(p.s0 + i));
    V::store(p.s0 + i, sum);
    const R std_dev = V::add(V::sqrt(sum), V::set1(c.eps));
    store_param<V, O>(p, i, V::fnmadd(V::set1(c.clr), V::div(g, std_dev), w));
  }
};

template <class V, class Op, ElementType G, Out O>
void stream_loop(const Ptrs& p, int64_t n, float scale, const typename Op::Coef& c) {
  constexpr int kW = V::kWidth;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) Op::template apply<V, G, O>(p, i, scale, c);
  const int64_t rest = n - i;
  if (rest == 0) return;
  alignas(64) float param[kW] = {}, s0[kW] = {}, s1[kW] = {}, grad32[kW] = {};
  alignas(64) uint16_t grad16[kW] = {}, out[kW] = {};
  for (int64_t k = 0; k < rest; ++k) {
    param[k] = p.param[i + k];
    if (p.s0 != nullptr) s0[k] = p.s0[i + k];
    if (p.s1 != nullptr) s1[k] = p.s1[i + k];
    if constexpr (G == ElementType::kF32) grad32[k] = static_cast<const float*>(p.grad)[i + k];
    else grad16[k] = static_cast<const uint16_t*>(p.grad)[i + k];
  }
  const void* grad = G == ElementType::kF32 ? static_cast<const void*>(grad32) : static_cast<const void*>(grad16);
  const Ptrs t{param, grad, out, p.s0 != nullptr ? s0 : nullptr, p.s1 != nullptr ? s1 : nullptr};
  Op::template apply<V, G, O>(t, 0, scale, c);
  for (int64_t k = 0; k < rest; ++k) {
    p.param[i + k] = param[k];
    if (p.s0 != nullptr) p.s0[i + k] = s0[k];
    if (p.s1 != nullptr) p.s1[i + k] = s1[k];
    if constexpr (O != Out::kNone) p.out16[i + k] = out[k];
  }
}

template <class V, class Op, ElementType G>
void run_typed(const Stream& s, const Ptrs& p, const typename Op::Coef& c) {
  if (s.out16 == nullptr) stream_loop<V, Op, G, Out::kNone>(p, s.n, s.grad_scale, c);
  else if (s.out_type == ElementType::kF16) stream_loop<V, Op, G, Out::kF16>(p, s.n, s.grad_scale, c);
  else stream_loop<V, Op, G, Out::kBF16>(p, s.n, s.grad_scale, c);
}

template <class V, class Op>
void run(const Stream& s, float* s0, float* s1, const typename Op::Coef& c) {
  const Ptrs p{s.param, s.grad, s.out16, s0, s1};
  switch (s.grad_type) {
    case ElementType::kF32: run_typed<V, Op, ElementType::kF32>(s, p, c); break;
    case ElementType::kBF16: run_typed<V, Op, ElementType::kBF16>(s, p, c); break;
    case ElementType::kF16: run_typed<V, Op, ElementType::kF16>(s, p, c); break;
  }
}

template <class V>
const KernelTable* make_table() {
  static const KernelTable table{
      V::kName,
      [](const Stream& s, float* m, float* v, const AdamCoef& c) { run<V, AdamOp>(s, m, v, c); },
      [](const Stream& s, float* buf, const SgdCoef& c) { run<V, SgdOp>(s, buf, nullptr, c); },
      [](const Stream& s, float* m, const LionCoef& c) { run<V, LionOp>(s, m, nullptr, c); },
      [](const Stream& s, float* sum, const AdagradCoef& c) { run<V, AdagradOp>(s, sum, nullptr, c); }};
  return &table;
}

}  // namespace
}  // namespace optim_kernels
}  // namespace hftrain
