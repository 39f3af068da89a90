// The attention kernels written once over a SIMD lane type V (kernels/simd_*.h). Included by one .cpp per
// instruction set, each compiled with its own target flags; everything here has internal linkage, so that
// no function compiled for one ISA can be picked by the linker for another. See attention.h for the math.
// Two register-blocked products do the work: `scores` (rows of q against the transposed keys) and `rows_times`
// (a block of rows of probabilities times the rows of V, K, dO or q), each 4 rows x up to 4 lanes of
// accumulators, independent FMA chains. q, dO, K and V are read in place (their strided rows) when the head
// dimension is whole lanes; only the keys and values are transposed into scratch.
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

  // dst[c * ld + j] = rows[j][c]: a head's keys (or values) transposed, padded with zeros to ld columns. In
  // tiles of 16 rows, so that consecutive stores fill one row of dst (transposed a row at a time, every store
  // went to another row of dst, and that loop was the forward's hottest in perf).
  static void transpose(const HeadLayout& t, int64_t b, int64_t h, int64_t rows, int64_t dim, int64_t ld, float* dst) {
    for (int64_t c = 0; c < dim; ++c) std::memset(dst + c * ld + rows, 0, sizeof(float) * (ld - rows));
    constexpr int64_t kTile = 16;
    const float* src[kTile];
    for (int64_t j0 = 0; j0 < rows; j0 += kTile) {
      const int64_t n = std::min(kTile, rows - j0);
      for (int64_t j = 0; j < n; ++j) src[j] = t.row(b, h, j0 + j);
      for (int64_t c = 0; c < dim; ++c) {
        float* out = dst + c * ld + j0;
        for (int64_t j = 0; j < n; ++j) out[j] = src[j][c];
      }
    }
  }

  // Rows [first, first + rows) of head (b, h) as a matrix with leading dimension `ld`: read in place when the
  // head dimension is a whole number of lanes (the products read dp = dim columns), else copied to dst and
  // padded with zeros to dp columns.
  struct Rows {
    const float* data;
    int64_t ld;
    const float* row(int64_t r) const { return data + r * ld; }
  };
  static Rows rows_view(const HeadLayout& t, int64_t b, int64_t h, int64_t first, int64_t rows, int64_t dim, int64_t dp,
                        float* dst) {
    if (dim == dp) return {t.row(b, h, first), t.time_stride};
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + r * dp, t.row(b, h, first + r), sizeof(float) * dim);
      std::memset(dst + r * dp + dim, 0, sizeof(float) * (dp - dim));
    }
    return {dst, dp};
  }

  // The key bias of batch row b, padded with zeros (the padding keys are masked by `visible`).
  static void bias_row(const AttentionShape& s, int64_t b, int64_t ld, float* dst) {
    for (int64_t j = 0; j < ld; ++j) dst[j] = s.key_bias != nullptr && j < s.keys ? s.key_bias[b * s.key_bias_batch_stride + j] : 0.0f;
  }

  // Lanes of columns per register block: 4 rows x kLanes lanes of accumulators (16 independent FMA chains with
  // AVX-512's 32 registers, 8 with AVX2's 16), so that neither the FMA latency nor the loads bound the products.
  static constexpr int kLanes = W >= 16 ? 4 : (W >= 8 ? 2 : 4);

  // out[r * ld + j] = bias[j] + sum_c (scale a[r * lda + c]) bt[c * ld + j], for RR rows and the CB lanes of
  // columns from j0 (q scaled before the product, as the LibTorch path and HF's SDPA do). bias may be null (0).
  template <int RR, int CB>
  static void scores_block(const float* a, int64_t lda, const float* bt, int64_t ld, int64_t dim, float scale,
                           const float* bias, int64_t j0, float* out) {
    R acc[RR][CB];
    for (int cb = 0; cb < CB; ++cb) {
      const R init = bias != nullptr ? V::load(bias + j0 + cb * W) : V::zero();
      for (int r = 0; r < RR; ++r) acc[r][cb] = init;
    }
    for (int64_t c = 0; c < dim; ++c) {
      R col[CB];
      for (int cb = 0; cb < CB; ++cb) col[cb] = V::load(bt + c * ld + j0 + cb * W);
      for (int r = 0; r < RR; ++r) {
        const R x = V::set1(a[r * lda + c] * scale);
        for (int cb = 0; cb < CB; ++cb) acc[r][cb] = V::fmadd(x, col[cb], acc[r][cb]);
      }
    }
    for (int r = 0; r < RR; ++r)
      for (int cb = 0; cb < CB; ++cb) V::store(out + r * ld + j0 + cb * W, acc[r][cb]);
  }
  template <int RR>
  static void scores_rows(const float* a, int64_t lda, const float* bt, int64_t ld, int64_t dim, float scale,
                          const float* bias, int64_t cols, float* out) {
    int64_t j0 = 0;
    for (; j0 + kLanes * W <= cols; j0 += kLanes * W) scores_block<RR, kLanes>(a, lda, bt, ld, dim, scale, bias, j0, out);
    for (; j0 + 2 * W <= cols; j0 += 2 * W) scores_block<RR, 2>(a, lda, bt, ld, dim, scale, bias, j0, out);
    for (; j0 < cols; j0 += W) scores_block<RR, 1>(a, lda, bt, ld, dim, scale, bias, j0, out);
  }
  // Scores of the rows of `a` against the first `cols` (a multiple of W) columns of bt.
  static void scores(const Rows& a, int64_t rows, const float* bt, int64_t ld, int64_t dim, float scale, const float* bias,
                     int64_t cols, float* out) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) scores_rows<4>(a.row(r), a.ld, bt, ld, dim, scale, bias, cols, out + r * ld);
    for (; r < rows; ++r) scores_rows<1>(a.row(r), a.ld, bt, ld, dim, scale, bias, cols, out + r * ld);
  }

  // out[r * ldo + c] (+)= sum_l p[r * rs + l * cs] * m[l * ldm + c], for RR rows, l < len, and the CB lanes of
  // columns from c0: probabilities (or dS) times rows of V, K, dO or q.
  template <int RR, int CB>
  static void rows_times_block(const float* p, int64_t rs, int64_t cs, int64_t len, const float* m, int64_t ldm,
                               int64_t c0, bool accumulate, float* out, int64_t ldo) {
    R acc[RR][CB];
    for (int r = 0; r < RR; ++r)
      for (int cb = 0; cb < CB; ++cb) acc[r][cb] = accumulate ? V::load(out + r * ldo + c0 + cb * W) : V::zero();
    for (int64_t l = 0; l < len; ++l) {
      R row[CB];
      for (int cb = 0; cb < CB; ++cb) row[cb] = V::load(m + l * ldm + c0 + cb * W);
      for (int r = 0; r < RR; ++r) {
        const R x = V::set1(p[r * rs + l * cs]);
        for (int cb = 0; cb < CB; ++cb) acc[r][cb] = V::fmadd(x, row[cb], acc[r][cb]);
      }
    }
    for (int r = 0; r < RR; ++r)
      for (int cb = 0; cb < CB; ++cb) V::store(out + r * ldo + c0 + cb * W, acc[r][cb]);
  }
  template <int RR>
  static void rows_times_rows(const float* p, int64_t rs, int64_t cs, int64_t len, const float* m, int64_t ldm,
                              int64_t dp, bool accumulate, float* out, int64_t ldo) {
    int64_t c0 = 0;
    for (; c0 + kLanes * W <= dp; c0 += kLanes * W)
      rows_times_block<RR, kLanes>(p, rs, cs, len, m, ldm, c0, accumulate, out, ldo);
    for (; c0 + 2 * W <= dp; c0 += 2 * W) rows_times_block<RR, 2>(p, rs, cs, len, m, ldm, c0, accumulate, out, ldo);
    for (; c0 < dp; c0 += W) rows_times_block<RR, 1>(p, rs, cs, len, m, ldm, c0, accumulate, out, ldo);
  }
  // out (+)= p m for `rows` rows, l < len, and the first dp (a multiple of W) columns.
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
    const Rows vr = rows_view(v, b, h, 0, s.keys, s.dim, dp, vp);
    bias_row(s, b, tk, bias);
    float* lse_row = lse + (b * s.heads + h) * s.queries;
    for (int64_t i0 = 0; i0 < s.queries; i0 += kRows) {
      const int64_t n_rows = std::min(kRows, s.queries - i0), n_max = visible(s, i0 + n_rows - 1);
      const int64_t cols = padded_to(n_max, W);
      scores(rows_view(q, b, h, i0, n_rows, s.dim, dp, qrows), n_rows, kt, tk, s.dim, s.scale, bias, cols, rows);
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
      rows_times(rows, tk, 1, n_rows, n_max, vr.data, vr.ld, dp, /*accumulate=*/false, acc, dp);
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
    float* qrows = ds + kBackwardRows * tk;  // kBackwardRows x dp (copies, when dim is not whole lanes)
    float* dorows = qrows + kBackwardRows * dp;
    float* dqrows = dorows + kBackwardRows * dp;
    transpose(k, b, h, s.keys, s.dim, tk, kt);
    transpose(v, b, h, s.keys, s.dim, tk, vt);
    const Rows kr = rows_view(k, b, h, 0, s.keys, s.dim, dp, kp);
    std::memset(dk_acc, 0, sizeof(float) * 2 * s.keys * dp);  // dk_acc and dv_acc
    bias_row(s, b, tk, bias);
    const float* lse_row = lse + (b * s.heads + h) * s.queries;
    for (int64_t i0 = 0; i0 < s.queries; i0 += kBackwardRows) {
      const int64_t n_rows = std::min(kBackwardRows, s.queries - i0), n_max = visible(s, i0 + n_rows - 1);
      const int64_t cols = padded_to(n_max, W);
      const Rows qr = rows_view(q, b, h, i0, n_rows, s.dim, dp, qrows);
      const Rows dor = rows_view(d_o, b, h, i0, n_rows, s.dim, dp, dorows);
      scores(qr, n_rows, kt, tk, s.dim, s.scale, bias, cols, p);  // S (scaled) + bias
      scores(dor, n_rows, vt, tk, s.dim, 1.0f, nullptr, cols, ds);  // dP = dO V^T
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
        const float* dorow = dor.row(r);
        float delta = 0;  // dO . O: the softmax backward's row term
        for (int64_t c = 0; c < s.dim; ++c) delta += dorow[c] * orow[c];
        const R lv = V::set1(l), dv_ = V::set1(delta), one = V::set1(1.0f);
        for (int64_t jb = 0; jb < cols; jb += W) {
          const R pv = V::exp(V::fnmadd(lv, one, V::load(pr + jb)));         // P = e^(S - lse)
          V::store(pr + jb, pv);
          V::store(dsr + jb, V::mul(pv, V::fnmadd(dv_, one, V::load(dsr + jb))));  // dS = P (dP - delta)
        }
        for (int64_t j = n; j < cols; ++j) pr[j] = dsr[j] = 0.0f;  // keys this row does not see
      }
      rows_times(ds, tk, 1, n_rows, n_max, kr.data, kr.ld, dp, false, dqrows, dp);  // dQ = dS K (times scale below)
      rows_times(p, 1, tk, n_max, n_rows, dor.data, dor.ld, dp, true, dv_acc, dp);   // dV += P^T dO
      rows_times(ds, 1, tk, n_max, n_rows, qr.data, qr.ld, dp, true, dk_acc, dp);    // dK += dS^T q (times scale below)
      for (int64_t r = 0; r < n_rows; ++r) {
        float* out = dq.row(b, h, i0 + r);
        for (int64_t c = 0; c < s.dim; ++c) out[c] = dqrows[r * dp + c] * s.scale;
      }
    }
    for (int64_t j = 0; j < s.keys; ++j) {
      float* dk_out = dk.row(b, h, j);
      for (int64_t c = 0; c < s.dim; ++c) dk_out[c] = dk_acc[j * dp + c] * s.scale;
      std::memcpy(dv.row(b, h, j), dv_acc + j * dp, sizeof(float) * s.dim);
    }
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
