// Runs the LayerNorm and RMSNorm kernels over the intra-op threads: forward in blocks of rows; backward in a fixed number
// of row blocks, each with its own dw / db partial sums, added in block order (see normalization.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/half_convert.h"
#include "kernels/kernel_table.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

constexpr int64_t kBackwardBlocks = 8;

// Rows per forward task: about 16K elements.
int64_t forward_grain(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)); }

// Runs block(k, begin, end) for the fixed row blocks of backward, in parallel; returns the block count.
template <class Fn>
int64_t for_each_block(int64_t rows, Fn block) {
  const int64_t blocks = std::min(kBackwardBlocks, std::max<int64_t>(1, rows));
  const int64_t per = (rows + blocks - 1) / blocks;
  parallel_range(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const int64_t begin = std::min(rows, k * per), end = std::min(rows, begin + per);
      if (begin < end) block(k, begin, end);
    }
  });
  return blocks;
}

// out = the sum of the blocks' partial rows, in block order (nothing when out is null).
void sum_parts(float* out, const std::vector<float>& parts, int64_t blocks, int64_t cols) {
  if (out == nullptr) return;
  std::memcpy(out, parts.data(), sizeof(float) * cols);
  for (int64_t k = 1; k < blocks; ++k)
    for (int64_t c = 0; c < cols; ++c) out[c] += parts[k * cols + c];
}

// Row r of a tensor that may be absent.
const float* row_or_null(const float* p, int64_t r, int64_t cols) { return p != nullptr ? p + r * cols : nullptr; }
float* row_or_null(float* p, int64_t r, int64_t cols) { return p != nullptr ? p + r * cols : nullptr; }

}  // namespace

void layer_norm_forward(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, rows, forward_grain(cols), [&](int64_t begin, int64_t end) {
    t->layer_norm_forward(x + begin * cols, row_or_null(residual, begin, cols), row_or_null(sum, begin, cols), w, b,
                          y + begin * cols, mean + begin, rstd + begin, end - begin, cols, eps);
  });
}

void layer_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                         const float* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t cols) {
  const ModelKernelTable* t = model_kernels();
  const int64_t most = kBackwardBlocks * cols;
  std::vector<float> dw_parts(dw != nullptr ? most : 0, 0.0f), db_parts(db != nullptr ? most : 0, 0.0f);
  const int64_t blocks = for_each_block(rows, [&](int64_t k, int64_t begin, int64_t end) {
    t->layer_norm_backward(x + begin * cols, w, dy + begin * cols, row_or_null(d_sum, begin, cols), mean + begin,
                           rstd + begin, dx + begin * cols, dw != nullptr ? dw_parts.data() + k * cols : nullptr,
                           db != nullptr ? db_parts.data() + k * cols : nullptr, end - begin, cols);
  });
  sum_parts(dw, dw_parts, blocks, cols);
  sum_parts(db, db_parts, blocks, cols);
}

void rms_norm_forward(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                      int64_t rows, int64_t cols, float eps) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, rows, forward_grain(cols), [&](int64_t begin, int64_t end) {
    t->rms_norm_forward(x + begin * cols, row_or_null(residual, begin, cols), row_or_null(sum, begin, cols), w,
                        y + begin * cols, rstd + begin, end - begin, cols, eps);
  });
}

void rms_norm_backward(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd, float* dx,
                       float* dw, int64_t rows, int64_t cols) {
  const ModelKernelTable* t = model_kernels();
  std::vector<float> dw_parts(dw != nullptr ? kBackwardBlocks * cols : 0, 0.0f);
  const int64_t blocks = for_each_block(rows, [&](int64_t k, int64_t begin, int64_t end) {
    t->rms_norm_backward(x + begin * cols, w, dy + begin * cols, row_or_null(d_sum, begin, cols), rstd + begin,
                         dx + begin * cols, dw != nullptr ? dw_parts.data() + k * cols : nullptr, end - begin, cols);
  });
  sum_parts(dw, dw_parts, blocks, cols);
}

void rms_norm_forward_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows, int64_t cols,
                           float eps) {
  const ModelKernelTable* t = model_kernels();
  parallel_range(0, rows, forward_grain(cols), [&](int64_t begin, int64_t end) {
    t->rms_norm_forward_bf16(x + begin * cols, w, y + begin * cols, rstd + begin, end - begin, cols, eps);
  });
}

void rms_norm_backward_bf16(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd, uint16_t* dx,
                            uint16_t* dw, int64_t rows, int64_t cols) {
  const ModelKernelTable* t = model_kernels();
  std::vector<float> dw_parts(dw != nullptr ? kBackwardBlocks * cols : 0, 0.0f);
  const int64_t blocks = for_each_block(rows, [&](int64_t k, int64_t begin, int64_t end) {
    t->rms_norm_backward_bf16(x + begin * cols, w, dy + begin * cols, rstd + begin, dx + begin * cols,
                              dw != nullptr ? dw_parts.data() + k * cols : nullptr, end - begin, cols);
  });
  if (dw == nullptr) return;
  std::vector<float> sum(static_cast<size_t>(cols));
  sum_parts(sum.data(), dw_parts, blocks, cols);
  for (int64_t c = 0; c < cols; ++c) dw[c] = simd::float_to_bf16(sum[c]);
}

}  // namespace kernels
}  // namespace hftrain
