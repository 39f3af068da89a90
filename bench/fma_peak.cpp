// The machine's fp32 FMA peak: each thread runs 12 independent chains of fused multiply-adds on full vector
// registers (AVX-512, else AVX2+FMA), enough to hide the FMA latency on two ports, with nothing loaded from
// memory. The roofline's ceiling for the GEMMs in bench/RESULTS.md (what fraction of it they reach).
//   build/fma_peak_bench [threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>

namespace {

constexpr long kIterations = 100000000;
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float chains_avx512() {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-8f);
  for (long it = 0; it < kIterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  float total = 0;
  for (int i = 0; i < kChains; ++i) total += _mm512_reduce_add_ps(acc[i]);
  return total;
}

__attribute__((target("avx2,fma"))) float chains_avx2() {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-8f);
  for (long it = 0; it < kIterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  float lanes[8], total = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float v : lanes) total += v;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !__builtin_cpu_supports("fma")) {
    std::printf("this CPU has neither AVX-512 nor FMA\n");
    return 0;
  }
  const int width = avx512 ? 16 : 8;
  std::vector<float> results(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { results[t] = avx512 ? chains_avx512() : chains_avx2(); });
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = 2.0 * width * kChains * static_cast<double>(kIterations) * threads;
  std::printf("%s, %d thread(s): %.1f GFLOP/s fp32 FMA peak (%.2f s; checksum %.3f)\n", avx512 ? "AVX-512" : "AVX2+FMA",
              threads, flops / seconds / 1e9, seconds, results[0]);
}
#else
int main() {
  std::printf("the FMA peak bench is written for x86-64\n");
  return 0;
}
#endif
