// Fused token cross-entropy on the CPU over rows of fp32 logits, split over the intra-op threads: per row the
// log-sum-exp, the loss (1 - eps)(lse - z[label]) + eps (lse - mean z) (HF's LabelSmoother; torch's
// cross_entropy with label_smoothing), and, when asked, the gradient of scale * (sum of the row losses) written
// over the logits: scale (softmax(z) - (1 - eps) onehot(label) - eps / vocab). Three passes over a row (max and
// sum; exponentials, kept in place; the gradient) instead of LibTorch's logsumexp, gather, sub, exp, scatter
// and mul, each a pass with its own temporaries. Rows whose label is ignore_index have loss 0 and gradient 0.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {
namespace kernels {

struct CrossEntropyRows {
  float* logits = nullptr;  // [rows, vocab], contiguous; overwritten by the gradient when `gradient`
  int64_t rows = 0, vocab = 0;
  const int64_t* labels = nullptr;  // [rows]
  int64_t ignore_index = -100;
  float epsilon = 0;  // label smoothing
  float scale = 1;    // the gradient's factor (1 / the loss's denominator)
  bool gradient = false;
  // Every label is ignore_index or in [0, vocab), as the caller found on the host: a device kernel's own verdict
  // need not be read back (a read that waits for the device). The host kernel checks regardless.
  bool labels_checked = false;
};

// row_loss[r] = the loss of row r. Throws std::out_of_range naming the row when a label is neither
// ignore_index nor in [0, vocab) (before anything is written).
void cross_entropy_rows(const CrossEntropyRows& problem, float* row_loss);

// The message of that std::out_of_range (the host and the CUDA kernels say the same).
std::string label_outside_vocabulary(int64_t row, int64_t label, int64_t vocab);

}  // namespace kernels
}  // namespace hftrain
