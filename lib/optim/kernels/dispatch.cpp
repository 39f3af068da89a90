// Picks the kernel table for this CPU (or HFTRAIN_OPTIM_ISA / set_isa) and splits each update across the
// intra-op threads, each thread walking its range in blocks small enough to stay in the L2 cache; a stream on a
// CUDA device goes whole to the CUDA table.
#include <stdexcept>

#include "kernels/cuda_launch.h"
#include "kernels/table_choice.h"
#include "optim/kernels/kernel_table.h"
#include "util/parallel.h"

namespace hftrain {
namespace optim_kernels {
namespace {

// 16384 elements: about 450 KB of AdamW traffic (28 B per element), within every current core's L2.
constexpr int64_t kBlock = 16384;

simd::TableChoice<KernelTable>& choice() {
  static simd::TableChoice<KernelTable> c(
      [] { return std::vector<const KernelTable*>{avx512_table(), avx2_table(), neon_table(), scalar_table()}; },
      "HFTRAIN_OPTIM_ISA", "optimizer kernels");
  return c;
}

const KernelTable* table() { return choice().current(); }

Stream slice(const Stream& s, int64_t begin, int64_t end) {
  Stream out = s;
  out.param = s.param + begin;
  out.grad = s.grad_type == ElementType::kF32 ? static_cast<const void*>(static_cast<const float*>(s.grad) + begin)
                                              : static_cast<const void*>(static_cast<const uint16_t*>(s.grad) + begin);
  if (s.out16 != nullptr) out.out16 = s.out16 + begin;
  out.n = end - begin;
  return out;
}

float* offset(float* p, int64_t begin) { return p == nullptr ? nullptr : p + begin; }

// The CUDA table for a stream on a CUDA device (whole, in one launch), or nullptr for host memory.
const KernelTable* device_table(const Stream& s) {
  if (!s.on_cuda) return nullptr;
  const KernelTable* t = cuda_table();
  if (t == nullptr) throw std::logic_error("optimizer kernels: a CUDA stream, and no CUDA updates (" + kernels::cuda_kernels_unusable() + ")");
  return t;
}

// Runs fn(stream slice, begin) over blocks of every thread's range.
template <class Fn>
void parallel_blocks(const Stream& s, Fn fn) {
  parallel_range(0, s.n, kBlock, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t e = b + kBlock < end ? b + kBlock : end;
      fn(slice(s, b, e), b);
    }
  });
}

}  // namespace

void adam_update(const Stream& s, float* exp_avg, float* exp_avg_sq, const AdamCoef& c) {
  if (const KernelTable* d = device_table(s)) return d->adam(s, exp_avg, exp_avg_sq, c);
  const KernelTable* t = table();
  parallel_blocks(s, [&](const Stream& part, int64_t b) { t->adam(part, exp_avg + b, exp_avg_sq + b, c); });
}

void sgd_update(const Stream& s, float* momentum_buffer, const SgdCoef& c) {
  if (const KernelTable* d = device_table(s)) return d->sgd(s, momentum_buffer, c);
  const KernelTable* t = table();
  parallel_blocks(s, [&](const Stream& part, int64_t b) { t->sgd(part, offset(momentum_buffer, b), c); });
}

void lion_update(const Stream& s, float* exp_avg, const LionCoef& c) {
  if (const KernelTable* d = device_table(s)) return d->lion(s, exp_avg, c);
  const KernelTable* t = table();
  parallel_blocks(s, [&](const Stream& part, int64_t b) { t->lion(part, exp_avg + b, c); });
}

void adagrad_update(const Stream& s, float* state_sum, const AdagradCoef& c) {
  if (const KernelTable* d = device_table(s)) return d->adagrad(s, state_sum, c);
  const KernelTable* t = table();
  parallel_blocks(s, [&](const Stream& part, int64_t b) { t->adagrad(part, state_sum + b, c); });
}

std::string active_isa() { return table()->name; }

bool cuda_updates_usable() { return cuda_table() != nullptr; }

std::vector<std::string> supported_isas() { return choice().names(); }

void set_isa(const std::string& name) { choice().force(name); }

std::string describe_kernels() {
  const int threads = parallel_threads();
  return active_isa() + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

}  // namespace optim_kernels
}  // namespace hftrain
