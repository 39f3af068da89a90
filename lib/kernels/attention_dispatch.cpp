// Runs the attention kernels' (batch, head) pairs in parallel on the intra-op threads, each thread with its
// own scratch memory.
#include <vector>

#include "kernels/kernel_table.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

// Runs fn(b, h, scratch) for every (batch, head) pair over the intra-op threads.
template <class Fn>
void for_each_head(const AttentionShape& s, int64_t scratch_floats, Fn fn) {
  parallel_range(0, s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats));
    for (int64_t bh = begin; bh < end; ++bh) fn(bh / s.heads, bh % s.heads, scratch.data());
  });
}

}  // namespace

void attention_forward(const AttentionShape& s, const HeadLayout& q, const HeadLayout& k, const HeadLayout& v,
                       const HeadLayout& o, float* lse) {
  const ModelKernelTable* t = model_kernels();
  for_each_head(s, forward_scratch(s, t->width),
                [&](int64_t b, int64_t h, float* scratch) { t->forward_head(s, b, h, q, k, v, o, lse, scratch); });
}

void attention_backward(const AttentionShape& s, const HeadLayout& q, const HeadLayout& k, const HeadLayout& v,
                        const HeadLayout& o, const HeadLayout& d_o, const float* lse, const HeadLayout& dq,
                        const HeadLayout& dk, const HeadLayout& dv) {
  const ModelKernelTable* t = model_kernels();
  for_each_head(s, backward_scratch(s, t->width), [&](int64_t b, int64_t h, float* scratch) {
    t->backward_head(s, b, h, q, k, v, o, d_o, lse, dq, dk, dv, scratch);
  });
}

}  // namespace kernels
}  // namespace hftrain
