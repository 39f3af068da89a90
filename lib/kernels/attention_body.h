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
  // a . b over n floats, in lanes (the sum's order differs from a serial loop's by fp32 rounding only).
  static float dot(const float* a, const float* b, int64_t n) {
    R acc = V::zero();
    int64_t c = 0;
    for (; c + W <= n; c += W) acc = V::fmadd(V::load(a + c), V::load(b + c), acc);
    float total = V::reduce_add(acc);
    for (; c < n; ++c) total += a[c] * b[c];
    return total;
  }

  // Columns (of bt) or rows (of m) per tile: a tile of kTile x 64 dims is 16 KiB, kept in L1 while every block of
  // 4 rows of the caller's block passes over it (streamed whole for each 4 rows, K and V came from L2 each time).
  static constexpr int64_t kTile = 4 * 16;

  // Scores of the rows of `a` against the first `cols` (a multiple of W) columns of bt.
  static void scores(const Rows& a, int64_t rows, const float* bt, int64_t ld, int64_t dim, float scale, const float* bias,
                     int64_t cols, float* out) {
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t n = std::min(kTile, cols - j0);
      const float* bias_tile = bias != nullptr ? bias + j0 : nullptr;
      int64_t r = 0;
      for (; r + 4 <= rows; r += 4) scores_rows<4>(a.row(r), a.ld, bt + j0, ld, dim, scale, bias_tile, n, out + r * ld + j0);
      for (; r < rows; ++r) scores_rows<1>(a.row(r), a.ld, bt + j0, ld, dim, scale, bias_tile, n, out + r * ld + j0);
    }
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
  // In tiles of kTile rows of m (l), each passed over by every block of 4 rows before the next (see kTile).
  static void rows_times(const float* p, int64_t rs, int64_t cs, int64_t rows, int64_t len, const float* m, int64_t ldm,
                         int64_t dp, bool accumulate, float* out, int64_t ldo) {
    for (int64_t l0 = 0; l0 < len || l0 == 0; l0 += kTile) {
      const int64_t n = std::min(kTile, len - l0);
      const float* pt = p + l0 * cs;
      const float* mt = m + l0 * ldm;
      const bool acc = accumulate || l0 > 0;
      int64_t r = 0;
      for (; r + 4 <= rows; r += 4) rows_times_rows<4>(pt + r * rs, rs, cs, n, mt, ldm, dp, acc, out + r * ldo, ldo);
      for (; r < rows; ++r) rows_times_rows<1>(pt + r * rs, rs, cs, n, mt, ldm, dp, acc, out + r * ldo, ldo);
    }
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
        int64_t c = 0;
        for (; c + W <= s.dim; c += W) V::store(out + c, V::mul(V::load(acc + r * dp + c), V::set1(inv)));
        for (; c < s.dim; ++c) out[c] = acc[r * dp + c] * inv;
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
        const float delta = dot(dor.row(r), o.row(b, h, i0 + r), s.dim);  // dO . O: the softmax backward's row term
        const R lv = V::set1(l), dv_ = V::set1(delta), one = V::set1(1.0f), scale = V::set1(s.scale);
        for (int64_t jb = 0; jb < cols; jb += W) {
          const R pv = V::exp(V::fnmadd(lv, one, V::load(pr + jb)));         // P = e^(S - lse)
          V::store(pr + jb, pv);
          // dS = P (dP - delta), times the scale that both dQ = dS K and dK = dS^T q carry
          V::store(dsr + jb, V::mul(V::mul(pv, V::fnmadd(dv_, one, V::load(dsr + jb))), scale));
        }
        for (int64_t j = n; j < cols; ++j) pr[j] = dsr[j] = 0.0f;  // keys this row does not see
      }
      // dQ = dS K, straight into dq's rows when the head dimension is whole lanes (else through dqrows).
      if (s.dim == dp) {
        rows_times(ds, tk, 1, n_rows, n_max, kr.data, kr.ld, dp, false, dq.row(b, h, i0), dq.time_stride);
      } else {
        rows_times(ds, tk, 1, n_rows, n_max, kr.data, kr.ld, dp, false, dqrows, dp);
        for (int64_t r = 0; r < n_rows; ++r) std::memcpy(dq.row(b, h, i0 + r), dqrows + r * dp, sizeof(float) * s.dim);
      }
      rows_times(p, 1, tk, n_max, n_rows, dor.data, dor.ld, dp, true, dv_acc, dp);   // dV += P^T dO
      rows_times(ds, 1, tk, n_max, n_rows, qr.data, qr.ld, dp, true, dk_acc, dp);    // dK += dS^T q
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
