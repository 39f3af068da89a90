// The fused embedding (kernels/embedding, models/fused_embedding) against LibTorch's embedding: the gathered rows
// and the table's gradient, with repeated ids, ids used once, rows never named, padding_idx, int32 and 2-D ids, and
// tables narrower and wider than a lane; fp32 bit for bit (the same sums in the same order), bf16 against the
// float64 sums rounded once; any thread count the same bits; an id outside the table refused by name; and the
// module's own path wherever the fused one does not apply.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "kernels/kernel_choice.h"
#include "models/fused_embedding.h"
#include "util/error.h"

using namespace hftrain;

namespace {

struct Gradients {
  torch::Tensor out, table_grad;
};

Gradients run(const torch::nn::Embedding& e, const torch::Tensor& ids, const torch::Tensor& dy, bool fused) {
  kernels::set_fused_kernels_enabled(fused);
  e->weight.mutable_grad() = torch::Tensor();
  auto out = apply_embedding(e, ids);
  out.backward(dy);
  kernels::set_fused_kernels_enabled(true);
  return {out.detach(), e->weight.grad().clone()};
}

}  // namespace

TEST_CASE("fused embedding gathers the rows and scatters the gradient as LibTorch's embedding does, bit for bit in fp32",
          "[unit][kernels]") {
  for (const int64_t cols : {1, 5, 16, 130}) {
    for (const bool padding : {false, true}) {
      for (const bool int32_ids : {false, true}) {
        INFO("cols " << cols << " padding_idx " << padding << " int32 ids " << int32_ids);
        torch::manual_seed(cols);
        auto options = torch::nn::EmbeddingOptions(37, cols);
        if (padding) options.padding_idx(3);
        torch::nn::Embedding e(options);
        // 2 x 45 ids over 37 rows: most repeated, some rows never named, the padding row among them.
        auto ids = torch::randint(0, 37, {2, 45}, torch::kLong);
        ids[0][0] = 3;
        ids[1][7] = 3;
        if (int32_ids) ids = ids.to(torch::kInt);
        const auto dy = torch::randn({2, 45, cols});
        const int64_t before = kernels::fused_calls(kernels::FusedKernel::kEmbedding);
        const Gradients fused = run(e, ids, dy, true);
        CHECK(kernels::fused_calls(kernels::FusedKernel::kEmbedding) == before + 1);
        const Gradients ops = run(e, ids, dy, false);
        CHECK(kernels::fused_calls(kernels::FusedKernel::kEmbedding) == before + 1);
        CHECK(fused.out.sizes() == ops.out.sizes());
        CHECK(torch::equal(fused.out, ops.out));
        CHECK(torch::equal(fused.table_grad, ops.table_grad));
        if (padding) CHECK(fused.table_grad[3].abs().max().item<float>() == 0.0f);
        CHECK(fused.table_grad.abs().sum().item<float>() > 0.0f);
      }
    }
  }
}

TEST_CASE("fused embedding's gradient is the same whatever the thread count", "[unit][kernels]") {
  torch::manual_seed(5);
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(5000, 64));
  const auto ids = torch::randint(0, 50, {8, 300}, torch::kLong);  // 2400 positions over 50 rows: long sums
  const auto dy = torch::randn({8, 300, 64});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Gradients one = run(e, ids, dy, true);
  at::set_num_threads(std::max(2, threads));
  const Gradients many = run(e, ids, dy, true);
  at::set_num_threads(threads);
  CHECK(torch::equal(one.out, many.out));
  CHECK(torch::equal(one.table_grad, many.table_grad));
}

TEST_CASE("fused embedding of a bf16 table: the rows as they are, each gradient row the float64 sum rounded once to bf16",
          "[unit][kernels]") {
  torch::manual_seed(11);
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(29, 40));
  e->to(torch::kBFloat16);
  const auto ids = torch::randint(0, 29, {3, 50}, torch::kLong);
  const auto dy = torch::randn({3, 50, 40}).to(torch::kBFloat16);
  const Gradients fused = run(e, ids, dy, true);
  CHECK(fused.out.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(fused.out, e->weight.detach().index_select(0, ids.view(-1)).view({3, 50, 40})));
  const auto want = torch::zeros({29, 40}, torch::kDouble).index_add_(0, ids.view(-1), dy.to(torch::kDouble).view({-1, 40}));
  // Half a bf16 ulp of each sum (2^-8 relative), plus the fp32 additions before it.
  const auto err = (fused.table_grad.to(torch::kDouble) - want).abs();
  CHECK((err <= want.abs() * (1.0 / 256) + 1e-5).all().item<bool>());
  CHECK(fused.table_grad.scalar_type() == torch::kBFloat16);
}

TEST_CASE("fused embedding refuses an id outside the table by naming it, and leaves other cases to the module",
          "[unit][kernels]") {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(10, 4));
  auto ids = torch::tensor({{1, 2}, {12, 0}}, torch::kLong);
  try {
    apply_embedding(e, ids);
    FAIL("an id outside the table was accepted");
  } catch (const RuntimeFailure& failure) {
    CHECK(std::string(failure.what()).find("token id 12 (position 2 of the batch) is outside the embedding table of 10 rows") !=
          std::string::npos);
  }
  ids[1][0] = -1;
  CHECK_THROWS_AS(apply_embedding(e, ids), RuntimeFailure);
  // max_norm renormalises the table in place: the module's own path.
  torch::nn::Embedding renormed(torch::nn::EmbeddingOptions(10, 4).max_norm(1.0));
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kEmbedding);
  const auto out = apply_embedding(renormed, torch::tensor({1, 2}, torch::kLong));
  CHECK(kernels::fused_calls(kernels::FusedKernel::kEmbedding) == before);
  CHECK(out.norm(2, -1).max().item<float>() <= 1.0f + 1e-6f);
}
