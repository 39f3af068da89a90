// The cross-entropy row kernel written once over a SIMD lane type V (kernels/simd_*.h); included by the per-ISA
// files, internal linkage throughout (see attention_body.h). See cross_entropy.h for the math. A row's tail
// shorter than a lane goes through the same lane code on a padded copy (-inf for the max and the
// exponentials, 0 for the sum), so every element rounds alike.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernel_table.h"

namespace hftrain {
namespace kernels {
namespace {

template <class V>
struct CrossEntropyBody {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // The last n (< W) floats of a row as a lane, padded with `pad`.
  static R tail(const float* z, int64_t n, float pad) {
    float lane[W];
    for (int64_t i = 0; i < W; ++i) lane[i] = i < n ? z[i] : pad;
    return V::load(lane);
  }

  static void row(float* z, int64_t vocab, int64_t label, float epsilon, float scale, bool gradient, float* loss) {
    const float minus_inf = -std::numeric_limits<float>::infinity();
    const int64_t full = vocab / W * W, rest = vocab - full;
    // Pass 1: the max (and the sum, for label smoothing's mean).
    R mv = V::set1(minus_inf), sv = V::zero();
    for (int64_t j = 0; j < full; j += W) {
      const R x = V::load(z + j);
      mv = V::max(mv, x);
      sv = V::add(sv, x);
    }
    if (rest > 0) {
      mv = V::max(mv, tail(z + full, rest, minus_inf));
      sv = V::add(sv, tail(z + full, rest, 0.0f));
    }
    const float m = V::reduce_max(mv), sum_z = V::reduce_add(sv), z_label = z[label];
    // Pass 2: e^(z - m), kept in place when the gradient follows, and their sum.
    const R mb = V::set1(m), one = V::set1(1.0f);
    R ev = V::zero();
    for (int64_t j = 0; j < full; j += W) {
      const R e = V::exp(V::fnmadd(mb, one, V::load(z + j)));
      if (gradient) V::store(z + j, e);
      ev = V::add(ev, e);
    }
    if (rest > 0) {
      const R e = V::exp(V::fnmadd(mb, one, tail(z + full, rest, minus_inf)));
      if (gradient) {
        float lane[W];
        V::store(lane, e);
        std::memcpy(z + full, lane, sizeof(float) * rest);
      }
      ev = V::add(ev, e);
    }
    // lse - z = (m - z) + log(total): the difference of the two large numbers is taken exactly first, so large
    // logits keep the loss's digits (lse itself is never rounded to a float).
    const float total = V::reduce_add(ev), log_total = std::log(total);
    *loss = (1.0f - epsilon) * ((m - z_label) + log_total) +
            epsilon * ((m - sum_z / static_cast<float>(vocab)) + log_total);
    if (!gradient) return;
    // Pass 3: scale (e / total - eps / vocab), then the label's - scale (1 - eps).
    const R factor = V::set1(scale / total), shift = V::set1(scale * epsilon / static_cast<float>(vocab));
    for (int64_t j = 0; j < full; j += W) V::store(z + j, V::fnmadd(shift, one, V::mul(V::load(z + j), factor)));
    if (rest > 0) {
      float lane[W];
      V::store(lane, V::fnmadd(shift, one, V::mul(tail(z + full, rest, 0.0f), factor)));
      std::memcpy(z + full, lane, sizeof(float) * rest);
    }
    z[label] -= scale * (1.0f - epsilon);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
