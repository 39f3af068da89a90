// The 4-bit dequantisation (kernels/quant4bit.h) on every instruction set this machine has, against a plain
// element-by-element reference written here from the layout (two codes a byte, the even element in the high
// nibble; code value * block absmax in float32; bf16 by torch's own rounding): bitwise, for NF4 and FP4, float32
// and bf16, blocks of 64, 128 and 4096, ranges that start and end on odd elements and inside blocks, block scales
// from the edges of float32 (zero, subnormal, huge: products that overflow), and the nested (double
// quantisation) absmax expanded to float32 by the quantised weight itself.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernel_choice.h"
#include "kernels/quant4bit.h"
#include "models/quantized_weight.h"

namespace {

// The reference: out[i - begin] = code[nibble i] * absmax[i / block], in float32.
std::vector<float> dequant4_reference(const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                                      const float* code, int64_t block, int64_t begin, int64_t end) {
  std::vector<float> out;
  for (int64_t i = begin; i < end; ++i) {
    const uint8_t byte = packed[static_cast<size_t>(i / 2)];
    const int nibble = i % 2 == 0 ? byte >> 4 : byte & 0x0F;
    out.push_back(code[nibble] * absmax[static_cast<size_t>(i / block)]);
  }
  return out;
}

// The float32 values rounded to bf16 by torch (round to nearest even), as bit patterns.
std::vector<uint16_t> dequant4_bf16_of(const std::vector<float>& values) {
  const torch::Tensor t =
      torch::from_blob(const_cast<float*>(values.data()), {static_cast<int64_t>(values.size())}, torch::kFloat)
          .to(torch::kBFloat16)
          .contiguous();
  std::vector<uint16_t> out(values.size());
  std::memcpy(out.data(), t.data_ptr<at::BFloat16>(), out.size() * sizeof(uint16_t));
  return out;
}

// Ranges [begin, end) of an n-element weight in blocks of `block`: whole, odd ends, within one block, across one
// block boundary, a few elements, the last lane's worth.
std::vector<std::pair<int64_t, int64_t>> dequant4_ranges(int64_t n, int64_t block) {
  return {{0, n},          {1, n - 1},     {3, 2 * block + 5}, {block - 1, block + 1}, {block + 2, block + 37},
          {7, 8},          {n - 17, n},    {5, 5},             {block / 2 + 1, 3 * block - 3}};
}

// Runs both dequantisations on the instruction set in force over each range, against the reference.
void check_dequant4_ranges(const std::vector<uint8_t>& packed, const std::vector<float>& absmax, const float* code,
                           int64_t n, int64_t block) {
  for (const auto& [begin, end] : dequant4_ranges(n, block)) {
    INFO("elements " << begin << ".." << end);
    const std::vector<float> want = dequant4_reference(packed, absmax, code, block, begin, end);
    std::vector<float> got(want.size() + 1, 7.0f);  // one sentinel past the end
    hftrain::kernels::dequantize_4bit(packed.data(), absmax.data(), code, block, begin, end, got.data());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    CHECK(got.back() == 7.0f);
    const std::vector<uint16_t> want16 = dequant4_bf16_of(want);
    std::vector<uint16_t> got16(want16.size() + 1, 0x1234);
    hftrain::kernels::dequantize_4bit_bf16(packed.data(), absmax.data(), code, block, begin, end, got16.data());
    CHECK(std::memcmp(got16.data(), want16.data(), want16.size() * sizeof(uint16_t)) == 0);
    CHECK(got16.back() == 0x1234);
  }
}

}  // namespace

TEST_CASE("4-bit dequantisation is bitwise the element-by-element product on every instruction set", "[unit][quant4bit]") {
  namespace k = hftrain::kernels;
  std::mt19937 rng(11);
  for (const std::string& isa : k::model_kernel_isas()) {
    k::set_model_kernel_isa(isa);
    REQUIRE(k::model_kernel_isa() == isa);
    for (const auto type : {k::Quant4Type::kNf4, k::Quant4Type::kFp4}) {
      const float* code = k::quant4_code_values(type);
      for (const int64_t block : {64, 128, 4096}) {
        const int64_t n = 3 * block + 37;  // an odd count: the last byte's low nibble unused
        INFO(isa << (type == k::Quant4Type::kNf4 ? " nf4" : " fp4") << " block " << block);
        std::vector<uint8_t> packed(static_cast<size_t>((n + 1) / 2));
        for (auto& b : packed) b = static_cast<uint8_t>(rng() & 0xFF);
        // Block scales of every magnitude: random bit patterns of finite floats, and 0, a subnormal, the largest.
        std::vector<float> absmax(static_cast<size_t>(k::quant_blocks(n, block)));
        for (auto& a : absmax) {
          uint32_t bits = rng() & 0x7FFFFFFFu;
          if ((bits >> 23) == 0xFF) bits &= 0x7F7FFFFFu;
          std::memcpy(&a, &bits, sizeof a);
        }
        absmax[0] = 0.0f;
        absmax[1] = 1.5e-40f;
        absmax[2] = 3.4028235e38f;
        check_dequant4_ranges(packed, absmax, code, n, block);
      }
    }
  }
  k::set_model_kernel_isa("");
}

TEST_CASE("4-bit dequantisation of a quantised weight with nested absmax is bitwise the same on every instruction set",
          "[unit][quant4bit]") {
  namespace k = hftrain::kernels;
  torch::manual_seed(5);
  // 70,001 elements: the dispatch splits them over the threads in pieces of 32K.
  const torch::Tensor w = torch::randn({7, 10001});
  for (const auto type : {k::Quant4Type::kNf4, k::Quant4Type::kFp4}) {
    for (const int64_t block : {64, 4096}) {
      hftrain::QuantSettings s;
      s.type = type;
      s.blocksize = block;
      s.double_quant = true;
      const hftrain::QuantizedWeight q = hftrain::quantize_weight(w, s);
      REQUIRE(q.nested());
      const torch::Tensor scales = q.block_absmax().contiguous();  // map[code] * nested absmax + offset
      const torch::Tensor codes = q.packed.contiguous();
      const std::vector<uint8_t> packed(codes.data_ptr<uint8_t>(), codes.data_ptr<uint8_t>() + codes.numel());
      const std::vector<float> absmax(scales.data_ptr<float>(), scales.data_ptr<float>() + scales.numel());
      for (const std::string& isa : k::model_kernel_isas()) {
        k::set_model_kernel_isa(isa);
        INFO(isa << (type == k::Quant4Type::kNf4 ? " nf4" : " fp4") << " block " << block);
        check_dequant4_ranges(packed, absmax, k::quant4_code_values(type), q.numel(), block);
        // The layer's own path (row tiles into the compute dtype) gives the same values.
        const std::vector<float> want = dequant4_reference(packed, absmax, k::quant4_code_values(type), block, 0, q.numel());
        const torch::Tensor all = q.dequantize(torch::kFloat).contiguous();
        CHECK(std::memcmp(all.data_ptr<float>(), want.data(), want.size() * sizeof(float)) == 0);
      }
    }
  }
  k::set_model_kernel_isa("");
}
