// Block-wise dynamic 8-bit quantisation (see blockwise_quant.h).
#include "optim/blockwise_quant.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"
#include "util/parallel.h"

namespace hftrain {
namespace {

// |value| of a code's low `bits` bits (bits = 7 signed, 8 unsigned): E leading zeros, the indicator, F fraction bits.
double magnitude(unsigned r, int bits) {
  if (r == 0) return 0.0;
  int e = 0;
  while (!(r & (1u << (bits - 1 - e)))) ++e;
  const int f_bits = bits - 1 - e;
  const unsigned f = r & ((1u << f_bits) - 1u);
  double ten = 1.0;
  for (int i = 0; i <= e; ++i) ten *= 10.0;  // 10^(E+1), an exact integer
  return (1.0 + 9.0 * static_cast<double>(f + 1) / static_cast<double>(1u << f_bits)) / ten;
}

std::vector<float> build_codebook(QuantSign sign) {
  std::vector<float> book(256);
  for (unsigned c = 0; c < 256; ++c) {
    if (sign == QuantSign::kUnsigned) {
      book[c] = static_cast<float>(magnitude(c, 8));
    } else {
      const double m = magnitude(c & 0x7Fu, 7);
      book[c] = static_cast<float>((c & 0x80u) ? -m : m);
    }
  }
  return book;
}

// Codes sorted by value and the double midpoints between neighbours, for the nearest-value search.
struct SearchTable {
  std::vector<uint8_t> codes;     // by ascending value (one code per distinct value)
  std::vector<double> midpoints;  // codes.size() - 1
};

SearchTable build_search(QuantSign sign) {
  const std::vector<float>& book = dynamic_codebook(sign);
  std::vector<unsigned> order(256);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return book[a] < book[b]; });
  SearchTable t;
  for (unsigned c : order) {
    if (!t.codes.empty() && book[t.codes.back()] == book[c]) continue;  // 0x80 duplicates 0: keep code 0
    t.codes.push_back(static_cast<uint8_t>(c));
  }
  for (std::size_t k = 0; k + 1 < t.codes.size(); ++k)
    t.midpoints.push_back((static_cast<double>(book[t.codes[k]]) + static_cast<double>(book[t.codes[k + 1]])) / 2.0);
  return t;
}

const SearchTable& search_table(QuantSign sign) {
  static const SearchTable s = build_search(QuantSign::kSigned), u = build_search(QuantSign::kUnsigned);
  return sign == QuantSign::kSigned ? s : u;
}

}  // namespace

const std::vector<float>& dynamic_codebook(QuantSign sign) {
  static const std::vector<float> s = build_codebook(QuantSign::kSigned), u = build_codebook(QuantSign::kUnsigned);
  return sign == QuantSign::kSigned ? s : u;
}

int64_t quant_block_count(int64_t numel, int64_t block_size) { return (numel + block_size - 1) / block_size; }

QuantizedTensor quantize_blockwise(const torch::Tensor& x_in, QuantSign sign, int64_t block_size) {
  if (block_size <= 0) throw RuntimeFailure("quantize_blockwise: block size must be positive");
  const torch::Tensor x = x_in.detach().to(torch::kFloat).contiguous();
  const int64_t n = x.numel(), blocks = quant_block_count(n, block_size);
  QuantizedTensor q;
  q.codes = torch::empty(x.sizes(), torch::TensorOptions().dtype(torch::kUInt8));
  q.absmax = torch::empty({blocks}, torch::TensorOptions().dtype(torch::kFloat));
  const float* src = x.data_ptr<float>();
  uint8_t* codes = q.codes.data_ptr<uint8_t>();
  float* absmax = q.absmax.data_ptr<float>();
  const SearchTable& table = search_table(sign);
  const uint8_t zero_code = 0;
  parallel_range(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * block_size, hi = std::min(n, lo + block_size);
      float m = 0.0f;
      for (int64_t i = lo; i < hi; ++i) m = std::max(m, std::fabs(src[i]));
      absmax[b] = m;
      for (int64_t i = lo; i < hi; ++i) {
        if (m == 0.0f) {
          codes[i] = zero_code;
          continue;
        }
        const float normed = src[i] / m;  // float32 division, as the reference's tensor division
        const double v = static_cast<double>(normed);
        // Index of the first midpoint >= v: the number of midpoints strictly below v.
        const auto it = std::lower_bound(table.midpoints.begin(), table.midpoints.end(), v);
        codes[i] = table.codes[static_cast<std::size_t>(it - table.midpoints.begin())];
      }
    }
  });
  return q;
}

torch::Tensor dequantize_blockwise(const QuantizedTensor& q, QuantSign sign, int64_t block_size) {
  const torch::Tensor codes = q.codes.contiguous();
  const int64_t n = codes.numel();
  if (q.absmax.numel() != quant_block_count(n, block_size))
    throw RuntimeFailure("dequantize_blockwise: " + std::to_string(q.absmax.numel()) + " block scales for " +
                         std::to_string(n) + " codes in blocks of " + std::to_string(block_size));
  torch::Tensor out = torch::empty(codes.sizes(), torch::TensorOptions().dtype(torch::kFloat));
  const torch::Tensor absmax_c = q.absmax.to(torch::kFloat).contiguous();
  const uint8_t* c = codes.data_ptr<uint8_t>();
  const float* absmax = absmax_c.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const std::vector<float>& book = dynamic_codebook(sign);
  parallel_range(0, n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = book[c[i]] * absmax[i / block_size];
  });
  return out;
}

}  // namespace hftrain
