// SplitMix64 (Steele, Lea and Flood 2014): the 64-bit finaliser that spreads seeds, and the tiny
// generator built on it, from which the data sources derive per-example and per-batch random streams
// that are pure functions of their seeds.
#pragma once

#include <cmath>
#include <cstdint>

namespace hftrain {

inline uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() { return splitmix64_finalize(state += 0x9E3779B97F4A7C15ull); }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // Box-Muller
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace hftrain
