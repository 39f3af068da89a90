// Rotary position embedding over the rows of a head tensor (HF's rotate_half convention: the first half of the
// rotated dims paired with the second), forward and backward in one pass, on the host (rotary.cpp, rows over the
// intra-op threads) and on a CUDA device (kernels/cuda/rotary.cu), both through rotary_pair below:
//   forward   out[c] = x[c] cos[c] + r[c] sin[c],   r = rotate_half(x) = (-x[h..2h), x[0..h))
//   backward  dx[c]  = dy[c] cos[c] + s[c],          s = (dy[h..2h) sin[h..2h), -dy[0..h) sin[0..h))
// for c < rotary (2h); the dims past `rotary` (a partial rotary) are copied. Each product and the sum are rounded
// to the output's type, as LibTorch's ops (t * cos + rotate_half(t) * sin) and their autograd (each input's gradient
// in that input's dtype) round them.
#pragma once

#include <cstdint>

#include "kernels/half_convert.h"
#include "kernels/host_device.h"

namespace hftrain {
namespace kernels {

enum class RowType { kF32, kBF16 };  // fp32, or bf16 bit patterns

struct RotaryRows {
  const void* x = nullptr;  // [batch, heads, tokens, dim], the last dim contiguous, the others at `x_stride`
  RowType x_type = RowType::kF32;
  int64_t batch = 0, heads = 0, tokens = 0, dim = 0, rotary = 0;  // rotary even, <= dim
  int64_t x_stride[3] = {0, 0, 0};                               // elements between batches, heads, tokens
  const void* cos = nullptr;  // contiguous [table_batch, tokens, rotary]; table_batch 1 (shared) or batch
  const void* sin = nullptr;
  RowType table_type = RowType::kF32;
  int64_t table_batch = 1;
  void* out = nullptr;  // contiguous [batch, heads, tokens, dim]
  RowType out_type = RowType::kF32;
  bool backward = false;  // x is dy; out is dx, of the forward input's type (out_type), rounded there as autograd rounds
};

// Loads, rounding and stores of one element type, chosen at compile time.
template <RowType T>
struct RowIo {
  HFTRAIN_HD static float load(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  HFTRAIN_HD static float round(float v) { return v; }
  HFTRAIN_HD static void store(void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};
template <>
struct RowIo<RowType::kBF16> {
  HFTRAIN_HD static float load(const void* p, int64_t i) {
    return simd::bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  HFTRAIN_HD static float round(float v) { return simd::bf16_to_float(simd::float_to_bf16(v)); }
  HFTRAIN_HD static void store(void* p, int64_t i, float v) { static_cast<uint16_t*>(p)[i] = simd::float_to_bf16(v); }
};

// Row r of the [batch * heads * tokens] rows: its first element in x, in the tables and in out.
struct RotaryRowStart {
  int64_t x, table, out;
};
HFTRAIN_HD RotaryRowStart rotary_row_start(const RotaryRows& p, int64_t r) {
  const int64_t t = r % p.tokens, bh = r / p.tokens, head = bh % p.heads, b = bh / p.heads;
  return {b * p.x_stride[0] + head * p.x_stride[1] + t * p.x_stride[2],
          ((p.table_batch == 1 ? 0 : b) * p.tokens + t) * p.rotary, r * p.dim};
}

// The pair (j, j + h) of one row, h = rotary / 2, j < h; or, for j >= h, the copied dim rotary + (j - h).
template <RowType X, RowType Tab, RowType Out>
HFTRAIN_HD void rotary_pair(const RotaryRows& p, const RotaryRowStart& at, int64_t j) {
  using XIo = RowIo<X>;
  using TIo = RowIo<Tab>;
  using OIo = RowIo<Out>;
  const int64_t h = p.rotary / 2;
  if (j >= h) {
    const int64_t c = p.rotary + (j - h);
    OIo::store(p.out, at.out + c, XIo::load(p.x, at.x + c));
    return;
  }
  const float a = XIo::load(p.x, at.x + j), b = XIo::load(p.x, at.x + j + h);
  const float cos_lo = TIo::load(p.cos, at.table + j), cos_hi = TIo::load(p.cos, at.table + j + h);
  const float sin_lo = TIo::load(p.sin, at.table + j), sin_hi = TIo::load(p.sin, at.table + j + h);
  const float a_cos = OIo::round(mul_rounded(a, cos_lo)), b_cos = OIo::round(mul_rounded(b, cos_hi));
  if (!p.backward) {  // (a, b) -> (a cos - b sin, b cos + a sin), each term rounded, then the sum
    OIo::store(p.out, at.out + j, OIo::round(a_cos + OIo::round(mul_rounded(-b, sin_lo))));
    OIo::store(p.out, at.out + j + h, OIo::round(b_cos + OIo::round(mul_rounded(a, sin_hi))));
  } else {  // (dy_a, dy_b) -> (dy_a cos + dy_b sin_hi, dy_b cos - dy_a sin_lo)
    OIo::store(p.out, at.out + j, OIo::round(a_cos + OIo::round(mul_rounded(b, sin_hi))));
    OIo::store(p.out, at.out + j + h, OIo::round(b_cos - OIo::round(mul_rounded(a, sin_lo))));
  }
}

// Pairs (and copied dims) per row: rotary / 2 + (dim - rotary).
HFTRAIN_HD int64_t rotary_items_per_row(const RotaryRows& p) { return p.rotary / 2 + (p.dim - p.rotary); }

// Calls fn.template run<X, Tab, Out>() for p's element types (the host loop and the CUDA launch).
template <class Fn>
void rotary_dispatch(const RotaryRows& p, Fn& fn) {
  constexpr RowType F = RowType::kF32, H = RowType::kBF16;
  const int key = (p.x_type == H ? 4 : 0) + (p.table_type == H ? 2 : 0) + (p.out_type == H ? 1 : 0);
  switch (key) {
    case 0: fn.template run<F, F, F>(); break;
    case 1: fn.template run<F, F, H>(); break;
    case 2: fn.template run<F, H, F>(); break;
    case 3: fn.template run<F, H, H>(); break;
    case 4: fn.template run<H, F, F>(); break;
    case 5: fn.template run<H, F, H>(); break;
    case 6: fn.template run<H, H, F>(); break;
    default: fn.template run<H, H, H>(); break;
  }
}

void rotary_rows(const RotaryRows& p);

}  // namespace kernels
}  // namespace hftrain
