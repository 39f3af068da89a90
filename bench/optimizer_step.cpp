// Micro-benchmark of one optimizer step over a flat fp32 parameter (driven by bench/optimizer_step.py): the
// kernels (every instruction set this CPU runs; fp32 or bf16 gradients; with or without bf16 write-back) and a
// plain streaming pass over the same bytes (read 4 arrays, write 3), the memory's limit. One JSON line per case:
// median and best ns per parameter and GB/s over the bytes the step must move.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "optim/kernels/update_kernels.h"
#include "util/parallel.h"

namespace ok = hftrain::optim_kernels;

namespace {

template <class T>
struct Buffer {  // touched once, so page faults stay out of the timed steps
  std::vector<T> v;
  Buffer(int64_t n, T value) : v(static_cast<std::size_t>(n), value) {}
  T* data() { return v.data(); }
};

template <class Fn>
void time_case(const std::string& name, const std::string& isa, int64_t n, double bytes_per_param, int repeats, Fn fn) {
  fn();  // warm-up
  fn();
  std::vector<double> secs;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  const double median = secs[secs.size() / 2], best = secs.front();
  std::printf("{\"case\": \"%s\", \"isa\": \"%s\", \"n\": %lld, \"threads\": %d, \"bytes_per_param\": %.0f, "
              "\"median_ms\": %.3f, \"best_ms\": %.3f, \"ns_per_param\": %.4f, \"gb_per_s\": %.3f, \"best_gb_per_s\": %.3f}\n",
              name.c_str(), isa.c_str(), static_cast<long long>(n), at::get_num_threads(), bytes_per_param, median * 1e3,
              best * 1e3, median * 1e9 / static_cast<double>(n), bytes_per_param * static_cast<double>(n) / median / 1e9,
              bytes_per_param * static_cast<double>(n) / best / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 10'000'000;
  int threads = 2, repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::atoll(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(threads);
  hftrain::sync_parallel_threads();
  Buffer<float> p(n, 0.5f), g(n, 1e-3f), m(n, 0.0f), v(n, 0.0f);
  Buffer<uint16_t> g16(n, 0x3A83), out16(n, 0);  // bf16 gradient ~1e-3

  // The streaming pass: read g, p, m, v and write p, m, v (28 bytes per parameter, as an fp32 AdamW step).
  time_case("stream", "-", n, 28, repeats, [&] {
    float *pp = p.data(), *mp = m.data(), *vp = v.data();
    const float* gp = g.data();
    hftrain::parallel_range(0, n, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float x = gp[i] + pp[i], y = mp[i] + vp[i];
        pp[i] = x;
        mp[i] = y;
        vp[i] = x;
      }
    });
  });
  // memcpy moving the same 28 bytes per parameter: three and a half float copies (each reads and writes).
  time_case("memcpy", "-", n, 28, repeats, [&] {
    hftrain::parallel_range(0, n, 16384, [&](int64_t b, int64_t e) {
      const std::size_t len = static_cast<std::size_t>(e - b) * sizeof(float);
      std::memcpy(p.data() + b, g.data() + b, len);
      std::memcpy(m.data() + b, v.data() + b, len);
      std::memcpy(v.data() + b, p.data() + b, len);
      std::memcpy(g.data() + b, m.data() + b, len / 2);
    });
  });
  std::fill(p.v.begin(), p.v.end(), 0.5f);  // the values the optimizer cases start from
  std::fill(g.v.begin(), g.v.end(), 1e-3f);
  std::fill(m.v.begin(), m.v.end(), 0.0f);
  std::fill(v.v.begin(), v.v.end(), 0.0f);
  ok::AdamCoef c;
  c.decay = 1 - 1e-3f * 0.01f;
  c.step_size = 1e-3f / 0.1f;
  c.inv_bias_correction2_sqrt = 31.6f;
  for (const auto& isa : ok::supported_isas()) {
    ok::set_isa(isa);
    ok::Stream s;
    s.param = p.data();
    s.grad = g.data();
    s.n = n;
    time_case("adamw fp32", isa, n, 28, repeats, [&] { ok::adam_update(s, m.data(), v.data(), c); });
    ok::Stream w = s;
    w.out16 = out16.data();
    time_case("adamw fp32 + bf16 write-back", isa, n, 30, repeats, [&] { ok::adam_update(w, m.data(), v.data(), c); });
    ok::Stream h = w;
    h.grad = g16.data();
    h.grad_type = ok::ElementType::kBF16;
    h.grad_scale = 0.5f;
    time_case("adamw bf16 grad + bf16 write-back", isa, n, 28, repeats, [&] { ok::adam_update(h, m.data(), v.data(), c); });
  }
  return 0;
}
