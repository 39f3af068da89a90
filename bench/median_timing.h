// The micro-benchmarks' timer: the median, over `repeats` timings of `calls` calls each (after one warm-up call),
// of the time per call, in milliseconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace hftrain_bench {

template <class Fn>
double median_ms(Fn fn, int calls, int repeats = 7) {
  std::vector<double> samples;
  fn();
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace hftrain_bench
