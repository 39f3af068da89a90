// The attention kernels written once over a SIMD lane type V (kernels/simd_*.h). Included by one .cpp per
// instruction set, each compiled with its own target flags; everything here has internal linkage, so that
// no function compiled for one ISA can be picked by the linker for another. See attention.h for the math.
// Two register-blocked products do the work: `scores` (rows of q against the transposed keys, 4 query rows
// at a time, one lane of keys per accumulator) and `rows_times` (a block of rows of probabilities times the
// rows of V, K, dO or q: 4 output rows x 2 lanes of accumulators, independent FMA chains).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernel_table.h"

namespace hftrain {
namespace kernels {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

template <class V>
struct AttentionBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // Keys query i may see: all, or causally those up to its own position (aligned at the end).
  static int64_t visible(const AttentionShape& s, int64_t i) {
    if (!s.causal) return s.keys;
    const int64_t n = i + (s.keys - s.queries) + 1;
    return n < 0 ? 0 : (n > s.keys ? s.keys : n);
  }

  // dst[c * ld + j] = rows[j][c]: a head's keys (or values) transposed, padded with zeros to ld columns.
  static void transpose(const HeadLayout& t, int64_t b, int64_t h, int64_t rows, int64_t dim, int64_t ld, float* dst) {
    for (int64_t c = 0; c < dim; ++c) std::memset(dst + c * ld + rows, 0, sizeof(float) * (ld - rows));
    for (int64_t j = 0; j < rows; ++j) {
      const float* src = t.row(b, h, j);
      for (int64_t c = 0; c < dim; ++c) dst[c * ld + j] = src[c];
    }
  }

  // dst[r * ld + c] = t[first + r][c] * scale, padded with zeros to ld.
  static void copy_rows(const HeadLayout& t, int64_t b, int64_t h, int64_t first, int64_t rows, int64_t dim, int64_t ld,
                        float scale, float* dst) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = t.row(b, h, first + r);
      float* out = dst + r * ld;
      for (int64_t c = 0; c < dim; ++c) out[c] = src[c] * scale;
      for (int64_t c = dim; c < ld; ++c) out[c] = 0.0f;
    }
  }

  // The key bias of batch row b, padded with zeros (the padding keys are masked by `visible`).
  static void bias_row(const AttentionShape& s, int64_t b, int64_t ld, float* dst) {
    for (int64_t j = 0; j < ld; ++j) dst[j] = s.key_bias != nullptr && j < s.keys ? s.key_bias[b * s.key_bias_batch_stride + j] : 0.0f;
  }

  // out[r * ld + j] = bias[j] + sum_c a[r * lda + c] * bt[c * ld + j], for RR rows and the first `cols` (a
  // multiple of W) columns. bias may be null (0).
  template <int RR>
  static void scores_rows(const float* a, int64_t lda, const float* bt, int64_t ld, int64_t dim, const float* bias,
                          int64_t cols, float* out) {
    for (int64_t jb = 0; jb < cols; jb += W) {
      R acc[RR];
      const R init = bias != nullptr ? V::load(bias + jb) : V::zero();
      for (int r = 0; r < RR; ++r) acc[r] = init;
      for (int64_t c = 0; c < dim; ++c) {
        const R col = V::load(bt + c * ld + jb);
        for (int r = 0; r < RR; ++r) acc[r] = V::fmadd(V::set1(a[r * lda + c]), col, acc[r]);
      }
      for (int r = 0; r < RR; ++r) V::store(out + r * ld + jb, acc[r]);
    }
  }
  static void scores(const float* a, int64_t lda, int64_t rows, const float* bt, int64_t ld, int64_t dim,
                     const float* bias, int64_t cols, float* out) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) scores_rows<4>(a + r * lda, lda, bt, ld, dim, bias, cols, out + r * ld);
    for (; r < rows; ++r) scores_rows<1>(a + r * lda, lda, bt, ld, dim, bias, cols, out + r * ld);
  }

  // out[r * ldo + c] (+)= sum_l p[r * rs + l * cs] * m[l * ldm + c], for RR rows, l < len, c < dp (a multiple of
  // W): probabilities (or dS) times rows of V, K, dO or q.
  template <int RR>
  static void rows_times_rows(const float* p, int64_t rs, int64_t cs, int64_t len, const float* m, int64_t ldm,
                              int64_t dp, bool accumulate, float* out, int64_t ldo) {
    for (int64_t c0 = 0; c0 < dp; c0 += 2 * W) {
      const bool two = c0 + W < dp;
      R acc0[RR], acc1[RR];
      for (int r = 0; r < RR; ++r) {
        acc0[r] = accumulate ? V::load(out + r * ldo + c0) : V::zero();
        acc1[r] = accumulate && two ? V::load(out + r * ldo + c0 + W) : V::zero();
      }
      for (int64_t l = 0; l < len; ++l) {
        const R m0 = V::load(m + l * ldm + c0);
        const R m1 = two ? V::load(m + l * ldm + c0 + W) : V::zero();
        for (int r = 0; r < RR; ++r) {
          const R a = V::set1(p[r * rs + l * cs]);
          acc0[r] = V::fmadd(a, m0, acc0[r]);
          acc1[r] = V::fmadd(a, m1, acc1[r]);
        }
      }
      for (int r = 0; r < RR; ++r) {
        V::store(out + r * ldo + c0, acc0[r]);
        if (two) V::store(out + r * ldo + c0 + W, acc1[r]);
      }
    }
  }
  static void rows_times(const float* p, int64_t rs, int64_t cs, int64_t rows, int64_t len, const float* m, int64_t ldm,
                         int64_t dp, bool accumulate, float* out, int64_t ldo) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) rows_times_rows<4>(p + r * rs, rs, cs, len, m, ldm, dp, accumulate, out + r * ldo, ldo);
    for (; r < rows; ++r) rows_times_rows<1>(p + r * rs, rs, cs, len, m, ldm, dp, accumulate, out + r * ldo, ldo);
  }

  static void forward_head(const AttentionShape& s, int64_t b, int64_t h, const HeadLayout& q, const HeadLayout& k,
                           const HeadLayout& v, const HeadLayout& o, float* lse, float* scratch) {
    const int64_t tk = padded_to(s.keys, W), dp = padded_to(s.dim, W);
    float* kt = scratch;
    float* vp = kt + s.dim * tk;
    float* bias = vp + s.keys * dp;
    float* rows = bias + tk;            // kRows x tk scores, then probabilities
    float* qrows = rows + kRows * tk;   // kRows x dp
    float* acc = qrows + kRows * dp;    // kRows x dp
    transpose(k, b, h, s.keys, s.dim, tk, kt);
    copy_rows(v, b, h, 0, s.keys, s.dim, dp, 1.0f, vp);
    bias_row(s, b, tk, bias);
    float* lse_row = lse + (b * s.heads + h) * s.queries;
    for (int64_t i0 = 0; i0 < s.queries; i0 += kRows) {
      const int64_t n_rows = std::min(kRows, s.queries - i0), n_max = visible(s, i0 + n_rows - 1);
      const int64_t cols = padded_to(n_max, W);
      copy_rows(q, b, h, i0, n_rows, s.dim, dp, s.scale, qrows);
      scores(qrows, dp, n_rows, kt, tk, s.dim, bias, cols, rows);
      float totals[kRows];
      for (int64_t r = 0; r < n_rows; ++r) {
        float* row = rows + r * tk;
        const int64_t n = visible(s, i0 + r);
        for (int64_t j = n; j < cols; ++j) row[j] = kMinusInf;
        R mv = V::set1(kMinusInf);
        for (int64_t jb = 0; jb < cols; jb += W) mv = V::max(mv, V::load(row + jb));
        const float m = cols > 0 ? V::reduce_max(mv) : kMinusInf;
        if (m == kMinusInf) {  // every key masked: the row's output is 0
          std::memset(row, 0, sizeof(float) * cols);
          totals[r] = 0;
          lse_row[i0 + r] = kMinusInf;
          continue;
        }
        R sum = V::zero();
        const R mb = V::set1(m), one = V::set1(1.0f);
        for (int64_t jb = 0; jb < cols; jb += W) {
          const R p = V::exp(V::fnmadd(mb, one, V::load(row + jb)));  // e^(s - max)
          V::store(row + jb, p);
          sum = V::add(sum, p);
        }
        totals[r] = V::reduce_add(sum);
        lse_row[i0 + r] = m + std::log(totals[r]);
      }
      rows_times(rows, tk, 1, n_rows, n_max, vp, dp, dp, /*accumulate=*/false, acc, dp);
      for (int64_t r = 0; r < n_rows; ++r) {
        float* out = o.row(b, h, i0 + r);
        const float inv = totals[r] > 0 ? 1.0f / totals[r] : 0.0f;
        for (int64_t c = 0; c < s.dim; ++c) out[c] = acc[r * dp + c] * inv;
      }
    }
  }

  static void backward_head(const AttentionShape& s, int64_t b, int64_t h, const HeadLayout& q, const HeadLayout& k,
                            const HeadLayout& v, const HeadLayout& o, const HeadLayout& d_o, const float* lse,
                            const HeadLayout& dq, const HeadLayout& dk, const HeadLayout& dv, float* scratch) {
    const int64_t tk = padded_to(s.keys, W), dp = padded_to(s.dim, W);
    float* kt = scratch;
    float* vt = kt + s.dim * tk;
    float* kp = vt + s.dim * tk;
    float* dk_acc = kp + s.keys * dp;
    float* dv_acc = dk_acc + s.keys * dp;
    float* bias = dv_acc + s.keys * dp;
    float* p = bias + tk;                   // kBackwardRows x tk
    float* ds = p + kBackwardRows * tk;     // kBackwardRows x tk
    float* qrows = ds + kBackwardRows * tk;  // kBackwardRows x dp (scaled)
    float* dorows = qrows + kBackwardRows * dp;
    float* dqrows = dorows + kBackwardRows * dp;
    transpose(k, b, h, s.keys, s.dim, tk, kt);
    transpose(v, b, h, s.keys, s.dim, tk, vt);
    copy_rows(k, b, h, 0, s.keys, s.dim, dp, 1.0f, kp);
    std::memset(dk_acc, 0, sizeof(float) * 2 * s.keys * dp);  // dk_acc and dv_acc
    bias_row(s, b, tk, bias);
    const float* lse_row = lse + (b * s.heads + h) * s.queries;
    for (int64_t i0 = 0; i0 < s.queries; i0 += kBackwardRows) {
      const int64_t n_rows = std::min(kBackwardRows, s.queries - i0), n_max = visible(s, i0 + n_rows - 1);
      const int64_t cols = padded_to(n_max, W);
      copy_rows(q, b, h, i0, n_rows, s.dim, dp, s.scale, qrows);
      copy_rows(d_o, b, h, i0, n_rows, s.dim, dp, 1.0f, dorows);
      scores(qrows, dp, n_rows, kt, tk, s.dim, bias, cols, p);    // S (scaled) + bias
      scores(dorows, dp, n_rows, vt, tk, s.dim, nullptr, cols, ds);  // dP = dO V^T
      for (int64_t r = 0; r < n_rows; ++r) {
        float* pr = p + r * tk;
        float* dsr = ds + r * tk;
        const int64_t n = visible(s, i0 + r);
        const float l = lse_row[i0 + r];
        if (n == 0 || l == kMinusInf) {  // the row's output was 0: no gradient flows through it
          std::memset(pr, 0, sizeof(float) * cols);
          std::memset(dsr, 0, sizeof(float) * cols);
          continue;
        }
        const float* orow = o.row(b, h, i0 + r);
        const float* dor = dorows + r * dp;
        float delta = 0;  // dO . O: the softmax backward's row term
        for (int64_t c = 0; c < s.dim; ++c) delta += dor[c] * orow[c];
        const R lv = V::set1(l), dv_ = V::set1(delta), one = V::set1(1.0f);
        for (int64_t jb = 0; jb < cols; jb += W) {
          const R pv = V::exp(V::fnmadd(lv, one, V::load(pr + jb)));         // P = e^(S - lse)
          V::store(pr + jb, pv);
          V::store(dsr + jb, V::mul(pv, V::fnmadd(dv_, one, V::load(dsr + jb))));  // dS = P (dP - delta)
        }
        for (int64_t j = n; j < cols; ++j) pr[j] = dsr[j] = 0.0f;  // keys this row does not see
      }
      rows_times(ds, tk, 1, n_rows, n_max, kp, dp, dp, false, dqrows, dp);       // dQ = dS K (times scale below)
      rows_times(p, 1, tk, n_max, n_rows, dorows, dp, dp, true, dv_acc, dp);      // dV += P^T dO
      rows_times(ds, 1, tk, n_max, n_rows, qrows, dp, dp, true, dk_acc, dp);      // dK += dS^T (scale q)
      for (int64_t r = 0; r < n_rows; ++r) {
        float* out = dq.row(b, h, i0 + r);
        for (int64_t c = 0; c < s.dim; ++c) out[c] = dqrows[r * dp + c] * s.scale;
      }
    }
    for (int64_t j = 0; j < s.keys; ++j) {
      std::memcpy(dk.row(b, h, j), dk_acc + j * dp, sizeof(float) * s.dim);
      std::memcpy(dv.row(b, h, j), dv_acc + j * dp, sizeof(float) * s.dim);
    }
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
