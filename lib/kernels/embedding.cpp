// The embedding's gather and scatter (see embedding.h).
#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/half_convert.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

int64_t element_size(TableType type) { return type == TableType::kFloat ? 4 : 2; }

// acc[c] += row[c] for a row of `type`.
void add_row(const void* row, TableType type, int64_t cols, float* acc) {
  if (type == TableType::kFloat) {
    const float* r = static_cast<const float*>(row);
    for (int64_t c = 0; c < cols; ++c) acc[c] += r[c];
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(row);
    for (int64_t c = 0; c < cols; ++c) acc[c] += simd::bf16_to_float(r[c]);
  }
}

void store_row(const float* acc, TableType type, int64_t cols, void* row) {
  if (type == TableType::kFloat) {
    std::memcpy(row, acc, sizeof(float) * cols);
  } else {
    uint16_t* r = static_cast<uint16_t*>(row);
    for (int64_t c = 0; c < cols; ++c) r[c] = simd::float_to_bf16(acc[c]);
  }
}

}  // namespace

int64_t first_id_outside(const int64_t* ids, int64_t positions, int64_t rows) {
  for (int64_t p = 0; p < positions; ++p)
    if (ids[p] < 0 || ids[p] >= rows) return p;
  return -1;
}

void embedding_gather(const void* table, TableType type, const int64_t* ids, int64_t positions, int64_t cols, void* out) {
  const int64_t row_bytes = cols * element_size(type);
  const char* src = static_cast<const char*>(table);
  char* dst = static_cast<char*>(out);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
  parallel_range(0, positions, grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) std::memcpy(dst + p * row_bytes, src + ids[p] * row_bytes, row_bytes);
  });
}

void embedding_scatter(const void* grad_out, TableType type, const int64_t* ids, int64_t positions, int64_t cols,
                       int64_t rows, int64_t skip_id, void* grad_table) {
  const int64_t row_bytes = cols * element_size(type);
  const char* g = static_cast<const char*>(grad_out);
  char* table = static_cast<char*>(grad_table);
  // The positions grouped by id, in position order within a group (a stable sort), skipped ids left out.
  std::vector<int64_t> order;
  order.reserve(positions);
  for (int64_t p = 0; p < positions; ++p)
    if (skip_id < 0 || ids[p] != skip_id) order.push_back(p);
  std::stable_sort(order.begin(), order.end(), [ids](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  std::vector<int64_t> group_starts;  // index in `order` where each id's group begins, then order.size()
  for (size_t i = 0; i < order.size(); ++i)
    if (i == 0 || ids[order[i]] != ids[order[i - 1]]) group_starts.push_back(static_cast<int64_t>(i));
  group_starts.push_back(static_cast<int64_t>(order.size()));
  const int64_t groups = static_cast<int64_t>(group_starts.size()) - 1;
  // Zero the table in blocks of rows (the pass that dominates: the whole table is written), then the named rows.
  const int64_t zero_grain = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, row_bytes));
  parallel_range(0, rows, zero_grain, [&](int64_t begin, int64_t end) {
    std::memset(table + begin * row_bytes, 0, static_cast<size_t>((end - begin) * row_bytes));
  });
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
  parallel_range(0, groups, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(cols));
    for (int64_t group = begin; group < end; ++group) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i = group_starts[group]; i < group_starts[group + 1]; ++i) add_row(g + order[i] * row_bytes, type, cols, acc.data());
      store_row(acc.data(), type, cols, table + ids[order[group_starts[group]]] * row_bytes);
    }
  });
}

}  // namespace kernels
}  // namespace hftrain
