// The LayerNorm and RMSNorm kernels written once over a SIMD lane type V (kernels/simd_*.h); included by the per-ISA
// files, internal linkage throughout (see attention_body.h). Whole lanes first, the row's tail element by
// element. With a residual, forward first writes the row's sum x + residual and normalises it, and backward adds
// the gradient that reaches the sum from elsewhere (d_sum) to dx.
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/half_convert.h"
#include "kernels/kernel_table.h"

namespace hftrain {
namespace kernels {
namespace {

// sum = a + b over one row, returned (the norm then reads the row while it is in L1).
template <class V>
const float* add_row(const float* a, const float* b, float* sum, int64_t cols) {
  int64_t c = 0;
  for (; c + V::kWidth <= cols; c += V::kWidth) V::store(sum + c, V::add(V::load(a + c), V::load(b + c)));
  for (; c < cols; ++c) sum[c] = a[c] + b[c];
  return sum;
}

template <class V>
struct LayerNormBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  static void forward_rows(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                           float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
    const int64_t full = cols / W * W;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = residual != nullptr ? add_row<V>(x + r * cols, residual + r * cols, sum + r * cols, cols) : x + r * cols;
      float* yr = y + r * cols;
      R acc = V::zero();
      for (int64_t c = 0; c < full; c += W) acc = V::add(acc, V::load(xr + c));
      float sum = V::reduce_add(acc);
      for (int64_t c = full; c < cols; ++c) sum += xr[c];
      const float m = sum / static_cast<float>(cols);
      const R mv = V::set1(m), one = V::set1(1.0f);
      acc = V::zero();
      for (int64_t c = 0; c < full; c += W) {
        const R d = V::fnmadd(mv, one, V::load(xr + c));
        acc = V::fmadd(d, d, acc);
      }
      float sq = V::reduce_add(acc);
      for (int64_t c = full; c < cols; ++c) sq += (xr[c] - m) * (xr[c] - m);
      const float s = 1.0f / std::sqrt(sq / static_cast<float>(cols) + eps);
      const R sv = V::set1(s);
      for (int64_t c = 0; c < full; c += W) {
        const R xhat = V::mul(V::fnmadd(mv, one, V::load(xr + c)), sv);
        const R out = V::mul(xhat, V::load(w + c));
        V::store(yr + c, b != nullptr ? V::add(out, V::load(b + c)) : out);
      }
      for (int64_t c = full; c < cols; ++c) yr[c] = (xr[c] - m) * s * w[c] + (b != nullptr ? b[c] : 0.0f);
      mean[r] = m;
      rstd[r] = s;
    }
  }

  // dx for `rows` rows; dw_part / db_part (when not null) accumulate this block's sums.
  static void backward_rows(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                            const float* rstd, float* dx, float* dw_part, float* db_part, int64_t rows, int64_t cols) {
    const int64_t full = cols / W * W;
    const float inv_n = 1.0f / static_cast<float>(cols);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      const float* gr = dy + r * cols;
      float* dxr = dx + r * cols;
      const float* dsr = d_sum != nullptr ? d_sum + r * cols : nullptr;
      const R mv = V::set1(mean[r]), sv = V::set1(rstd[r]), one = V::set1(1.0f);
      R sg = V::zero(), sgx = V::zero();  // sums of g = dy w and of g xhat
      for (int64_t c = 0; c < full; c += W) {
        const R xhat = V::mul(V::fnmadd(mv, one, V::load(xr + c)), sv);
        const R g = V::mul(V::load(gr + c), V::load(w + c));
        sg = V::add(sg, g);
        sgx = V::fmadd(g, xhat, sgx);
        if (dw_part != nullptr) V::store(dw_part + c, V::fmadd(V::load(gr + c), xhat, V::load(dw_part + c)));
        if (db_part != nullptr) V::store(db_part + c, V::add(V::load(gr + c), V::load(db_part + c)));
      }
      float g_sum = V::reduce_add(sg), gx_sum = V::reduce_add(sgx);
      for (int64_t c = full; c < cols; ++c) {
        const float xhat = (xr[c] - mean[r]) * rstd[r], g = gr[c] * w[c];
        g_sum += g;
        gx_sum += g * xhat;
        if (dw_part != nullptr) dw_part[c] += gr[c] * xhat;
        if (db_part != nullptr) db_part[c] += gr[c];
      }
      const float c1 = g_sum * inv_n, c2 = gx_sum * inv_n;
      const R c1v = V::set1(c1), c2v = V::set1(c2);
      for (int64_t c = 0; c < full; c += W) {  // dx = rstd (g - c1 - xhat c2)
        const R xhat = V::mul(V::fnmadd(mv, one, V::load(xr + c)), sv);
        const R g = V::mul(V::load(gr + c), V::load(w + c));
        const R d = V::mul(sv, V::fnmadd(xhat, c2v, V::fnmadd(c1v, one, g)));
        V::store(dxr + c, dsr != nullptr ? V::add(d, V::load(dsr + c)) : d);
      }
      for (int64_t c = full; c < cols; ++c) {
        const float xhat = (xr[c] - mean[r]) * rstd[r];
        const float d = rstd[r] * (gr[c] * w[c] - c1 - xhat * c2);
        dxr[c] = dsr != nullptr ? d + dsr[c] : d;
      }
    }
  }
};

template <class V>
struct RmsNormBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // One body for fp32 rows and bf16 ones (T = uint16_t bit patterns, computed in fp32): `hf` rounds a value to
  // bf16 where HF's RMSNorm on a bf16 model rounds -- the normalised x before the weight multiplies it, dy w in
  // backward, and each dy h that dw sums -- and leaves fp32 values alone.
  template <class T>
  static constexpr bool kBf16 = std::is_same<T, uint16_t>::value;
  template <class T>
  static R hf(R v) {
    if constexpr (kBf16<T>) return round_to_bf16<V>(v);
    return v;
  }
  template <class T>
  static float hf1(float v) {  // the row's tail, element by element
    if constexpr (kBf16<T>) return simd::bf16_to_float(simd::float_to_bf16(v));
    return v;
  }
  static float at(const float* p, int64_t c) { return p[c]; }
  static float at(const uint16_t* p, int64_t c) { return simd::bf16_to_float(p[c]); }
  static void put(float* p, int64_t c, float v) { p[c] = v; }
  static void put(uint16_t* p, int64_t c, float v) { p[c] = simd::float_to_bf16(v); }

  template <class T>
  static float normalize_row(const T* xr, const T* w, T* yr, int64_t cols, float eps) {
    const int64_t full = cols / W * W;
    R acc = V::zero();
    for (int64_t c = 0; c < full; c += W) {
      const R v = load_lane<V>(xr + c);
      acc = V::fmadd(v, v, acc);
    }
    float sq = V::reduce_add(acc);
    for (int64_t c = full; c < cols; ++c) sq += at(xr, c) * at(xr, c);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(cols) + eps);
    const R sv = V::set1(s);
    for (int64_t c = 0; c < full; c += W)
      store_lane<V>(yr + c, V::mul(load_lane<V>(w + c), hf<T>(V::mul(load_lane<V>(xr + c), sv))));
    for (int64_t c = full; c < cols; ++c) put(yr, c, at(w, c) * hf1<T>(at(xr, c) * s));
    return s;
  }

  // dx for one row (plus d_sum's row when not null: fp32 only); dw_part (fp32, when not null) accumulates dy xhat.
  template <class T>
  static void backward_row(const T* xr, const T* w, const T* gr, const float* dsr, float s, T* dxr, float* dw_part,
                           int64_t cols) {
    const int64_t full = cols / W * W;
    const R sv = V::set1(s);
    R sgx = V::zero();  // sum of g xhat, g = dy w
    for (int64_t c = 0; c < full; c += W) {
      const R xhat = V::mul(load_lane<V>(xr + c), sv);
      sgx = V::fmadd(hf<T>(V::mul(load_lane<V>(gr + c), load_lane<V>(w + c))), xhat, sgx);
      if (dw_part == nullptr) continue;
      const R dw = V::load(dw_part + c);
      V::store(dw_part + c, kBf16<T> ? V::add(hf<T>(V::mul(load_lane<V>(gr + c), hf<T>(xhat))), dw)
                                     : V::fmadd(load_lane<V>(gr + c), xhat, dw));
    }
    float gx_sum = V::reduce_add(sgx);
    for (int64_t c = full; c < cols; ++c) {
      const float xhat = at(xr, c) * s;
      gx_sum += hf1<T>(at(gr, c) * at(w, c)) * xhat;
      if (dw_part != nullptr) dw_part[c] += hf1<T>(at(gr, c) * hf1<T>(xhat));
    }
    const float mean_gx = gx_sum / static_cast<float>(cols);
    const R c2v = V::set1(mean_gx);
    for (int64_t c = 0; c < full; c += W) {  // dx = rstd (g - xhat mean(g xhat))
      const R xhat = V::mul(load_lane<V>(xr + c), sv);
      const R d = V::mul(sv, V::fnmadd(xhat, c2v, hf<T>(V::mul(load_lane<V>(gr + c), load_lane<V>(w + c)))));
      store_lane<V>(dxr + c, dsr != nullptr ? V::add(d, V::load(dsr + c)) : d);
    }
    for (int64_t c = full; c < cols; ++c) {
      const float d = s * (hf1<T>(at(gr, c) * at(w, c)) - at(xr, c) * s * mean_gx);
      put(dxr, c, dsr != nullptr ? d + dsr[c] : d);
    }
  }

  static void forward_rows(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                           int64_t rows, int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = residual != nullptr ? add_row<V>(x + r * cols, residual + r * cols, sum + r * cols, cols) : x + r * cols;
      rstd[r] = normalize_row<float>(xr, w, y + r * cols, cols, eps);
    }
  }

  static void backward_rows(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd,
                            float* dx, float* dw_part, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
      backward_row<float>(x + r * cols, w, dy + r * cols, d_sum != nullptr ? d_sum + r * cols : nullptr, rstd[r],
                          dx + r * cols, dw_part, cols);
  }

  // bf16 rows (bit patterns; see kBf16 above). dw_part stays fp32.
  static void forward_rows_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows,
                                int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; ++r) rstd[r] = normalize_row<uint16_t>(x + r * cols, w, y + r * cols, cols, eps);
  }

  static void backward_rows_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                                 float* dw_part, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
      backward_row<uint16_t>(x + r * cols, w, dy + r * cols, nullptr, rstd[r], dx + r * cols, dw_part, cols);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
