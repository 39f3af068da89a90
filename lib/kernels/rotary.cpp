// Rotary position embedding on the host (see rotary.h): rows over the intra-op threads.
#include "kernels/rotary.h"

#include <algorithm>

#include "util/parallel.h"

namespace hftrain {
namespace kernels {

namespace {

struct HostRows {
  const RotaryRows& p;
  template <RowType X, RowType Tab, RowType Out>
  void run() const {
    const int64_t rows = p.batch * p.heads * p.tokens, items = rotary_items_per_row(p);
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.dim));
    parallel_range(0, rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const RotaryRowStart at = rotary_row_start(p, r);
        for (int64_t j = 0; j < items; ++j) rotary_pair<X, Tab, Out>(p, at, j);
      }
    });
  }
};

}  // namespace

void rotary_rows(const RotaryRows& p) {
  HostRows rows{p};
  rotary_dispatch(p, rows);
}

}  // namespace kernels
}  // namespace hftrain
