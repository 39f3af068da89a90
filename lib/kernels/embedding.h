// The embedding's gather and its gradient's scatter on the CPU, over the intra-op threads. Forward copies one
// table row per position; backward writes the whole dense gradient of the table in one parallel pass: rows no
// position names are zero, each named row is the sum of its positions' gradients, added in position order in
// fp32 and stored once (LibTorch's embedding_dense_backward zero-fills the table, then index_adds the positions
// one at a time: for fp32 the same sums in the same order; for bf16 it rounds after every addition).
#pragma once

#include <cstdint>

namespace hftrain {
namespace kernels {

enum class TableType { kFloat, kBFloat16 };

// The first position whose id is outside [0, rows), or -1 when all are inside.
int64_t first_id_outside(const int64_t* ids, int64_t positions, int64_t rows);

// out[p] = table[ids[p]] for every position (rows of `cols` elements of `type`; ids checked by the caller).
void embedding_gather(const void* table, TableType type, const int64_t* ids, int64_t positions, int64_t cols, void* out);

// grad_table[r] = sum of grad_out[p] over the positions p with ids[p] == r (0 where none; a position whose id is
// skip_id, when skip_id >= 0, adds nothing: torch's padding_idx). grad_table has `rows` rows; both of `type`.
void embedding_scatter(const void* grad_out, TableType type, const int64_t* ids, int64_t positions, int64_t cols,
                       int64_t rows, int64_t skip_id, void* grad_table);

}  // namespace kernels
}  // namespace hftrain
