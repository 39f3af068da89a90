// Runs the cross-entropy row kernel over the intra-op threads, rows in blocks of about 16K logits.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/kernel_table.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {

std::string label_outside_vocabulary(int64_t row, int64_t label, int64_t vocab) {
  return "cross-entropy: the label of row " + std::to_string(row) + " is " + std::to_string(label) +
         ", outside the vocabulary [0, " + std::to_string(vocab) + ")";
}

void cross_entropy_rows(const CrossEntropyRows& p, float* row_loss) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t y = p.labels[r];
    if (y != p.ignore_index && (y < 0 || y >= p.vocab))
      throw std::out_of_range(label_outside_vocabulary(r, y, p.vocab));
  }
  const ModelKernelTable* t = model_kernels();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, p.vocab));
  parallel_range(0, p.rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* z = p.logits + r * p.vocab;
      if (p.labels[r] == p.ignore_index) {
        row_loss[r] = 0.0f;
        if (p.gradient) std::memset(z, 0, sizeof(float) * p.vocab);
        continue;
      }
      t->cross_entropy_row(z, p.vocab, p.labels[r], p.epsilon, p.scale, p.gradient, row_loss + r);
    }
  });
}

}  // namespace kernels
}  // namespace hftrain
