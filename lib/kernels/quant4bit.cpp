// Block-wise 4-bit (NF4 / FP4) and 8-bit dynamic quantisation in bitsandbytes' layout (see quant4bit.h); the 4-bit
// dequantisation runs on the SIMD lanes (quant4bit_body.h, quant4bit_dispatch.cpp).
#include "kernels/quant4bit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "util/error.h"
#include "util/parallel.h"

namespace hftrain {
namespace kernels {
namespace {

// QLoRA's NF4 table (arXiv:2305.14314, appendix E), by code.
constexpr std::array<float, 16> kNf4 = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

// bitsandbytes' FP4 magnitudes by the code's 3 low bits, before division by the largest (12).
constexpr std::array<double, 8> kFp4Magnitudes = {0.0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0};

const std::array<float, 16>& fp4_values() {
  static const std::array<float, 16> values = [] {
    std::array<float, 16> v{};
    for (int c = 0; c < 8; ++c) {
      v[c] = static_cast<float>(kFp4Magnitudes[c] / 12.0);
      v[c + 8] = -v[c];
    }
    return v;
  }();
  return values;
}

// Midpoints (double) between consecutive sorted values, and the code of each sorted value.
struct NearestTable {
  std::vector<double> midpoints;
  std::vector<uint8_t> codes;
  // The code of the value nearest to v: up past a midpoint only when strictly above it.
  uint8_t nearest(double v) const {
    const auto k = std::lower_bound(midpoints.begin(), midpoints.end(), v) - midpoints.begin();
    return codes[static_cast<std::size_t>(k)];
  }
};

NearestTable table_of(const float* values, int count) {
  std::vector<std::pair<float, int>> sorted;
  for (int c = 0; c < count; ++c) sorted.emplace_back(values[c], c);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  NearestTable t;
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    t.codes.push_back(static_cast<uint8_t>(sorted[k].second));
    if (k + 1 < sorted.size()) t.midpoints.push_back((static_cast<double>(sorted[k].first) + sorted[k + 1].first) / 2.0);
  }
  return t;
}

const NearestTable& nf4_table() {
  static const NearestTable t = table_of(kNf4.data(), 16);
  return t;
}

// FP4 by sign and magnitude: the non-negative half of the table.
const NearestTable& fp4_magnitude_table() {
  static const NearestTable t = table_of(fp4_values().data(), 8);
  return t;
}

uint8_t code4(float normalised, Quant4Type type) {
  if (type == Quant4Type::kNf4) return nf4_table().nearest(normalised);
  const uint8_t sign = normalised < 0.0f ? 8 : 0;
  return static_cast<uint8_t>(sign | fp4_magnitude_table().nearest(std::fabs(static_cast<double>(normalised))));
}

float block_absmax(const float* x, int64_t begin, int64_t end) {
  float m = 0.0f;
  for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[i]));
  if (!std::isfinite(m)) throw RuntimeFailure("quantising a weight: element " + std::to_string(begin) + ".." +
                                              std::to_string(end - 1) + " holds a value that is not finite");
  return m;
}

inline float normalised(float x, float absmax) { return absmax > 0.0f ? x / absmax : 0.0f; }

constexpr int64_t kGrainElements = 1 << 15;

}  // namespace

const float* quant4_code_values(Quant4Type type) { return type == Quant4Type::kNf4 ? kNf4.data() : fp4_values().data(); }

const float* dynamic_map_signed() {
  static const std::array<float, 256> map = [] {
    std::vector<double> v = {0.0, 1.0};
    for (int i = 0; i < 7; ++i) {
      const int points = (1 << i) + 1;  // 2^i + 1 evenly spaced boundaries from 0.1 to 1, their 2^i midpoints
      const double scale = std::pow(10.0, i - 6);
      for (int k = 0; k + 1 < points; ++k) {
        const double lo = 0.1 + 0.9 * k / (points - 1), hi = 0.1 + 0.9 * (k + 1) / (points - 1);
        v.push_back(scale * (lo + hi) / 2.0);
        v.push_back(-scale * (lo + hi) / 2.0);
      }
    }
    std::array<float, 256> out{};
    for (std::size_t k = 0; k < v.size(); ++k) out[k] = static_cast<float>(v[k]);
    std::sort(out.begin(), out.end());
    return out;
  }();
  return map.data();
}

int64_t quant_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

void quantize_4bit(const float* x, int64_t n, int64_t block, Quant4Type type, uint8_t* packed, float* absmax) {
  if (block < 2 || block % 2) throw RuntimeFailure("4-bit quantisation: the block size must be even, not " + std::to_string(block));
  const int64_t blocks = quant_blocks(n, block);
  parallel_range(0, blocks, std::max<int64_t>(1, kGrainElements / block), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * block, end = std::min(n, begin + block);
      const float m = block_absmax(x, begin, end);
      absmax[b] = m;
      for (int64_t i = begin; i < end; i += 2) {  // blocks are even, so a byte never spans two
        const uint8_t hi = code4(normalised(x[i], m), type);
        const uint8_t lo = i + 1 < end ? code4(normalised(x[i + 1], m), type) : 0;
        packed[i >> 1] = static_cast<uint8_t>(hi << 4 | lo);
      }
    }
  });
}

void quantize_8bit_blockwise(const float* x, int64_t n, int64_t block, const float* map, uint8_t* codes, float* absmax) {
  const NearestTable table = table_of(map, 256);
  const int64_t blocks = quant_blocks(n, block);
  parallel_range(0, blocks, std::max<int64_t>(1, kGrainElements / block), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * block, end = std::min(n, begin + block);
      const float m = block_absmax(x, begin, end);
      absmax[b] = m;
      for (int64_t i = begin; i < end; ++i) codes[i] = table.nearest(normalised(x[i], m));
    }
  });
}

void dequantize_8bit_blockwise(const uint8_t* codes, int64_t n, int64_t block, const float* map, const float* absmax,
                               float offset, float* out) {
  parallel_range(0, n, kGrainElements, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = dequantized_8bit(codes, map, absmax, block, offset, i);
  });
}

}  // namespace kernels
}  // namespace hftrain
