// The fused rotary embedding (kernels/rotary, models/fused_rotary) against LibTorch's ops, t * cos +
// rotate_half(t) * sin as HF's apply_rotary_pos_emb writes it (bit for bit, values and gradients: the kernel rounds
// where those ops and their autograd round), and against float64: fp32 and bf16 heads with fp32 or bf16 tables, a
// partial rotary, tables shared over the batch or one per row, heads as the transposed view the decoder passes.
#include <catch2/catch.hpp>

#include "kernels/kernel_choice.h"
#include "models/fused_rotary.h"

using namespace hftrain;

namespace {

struct RotaryCase {
  torch::ScalarType head_type, table_type;
  int64_t rotary, table_batch;
};

// q as the decoder makes it: [B, T, H, d] viewed as [B, H, T, d].
torch::Tensor heads_view(const torch::Tensor& bthd) { return bthd.transpose(1, 2); }

std::vector<torch::Tensor> run(const RotaryCase& c, const torch::Tensor& x0, const torch::Tensor& cos,
                               const torch::Tensor& sin, const torch::Tensor& dy, bool fused) {
  kernels::set_fused_kernels_enabled(fused);
  auto x = x0.clone().requires_grad_(true);
  auto y = apply_rotary(heads_view(x), cos, sin);
  y.backward(dy.to(y.scalar_type()));
  kernels::set_fused_kernels_enabled(true);
  return {y.detach(), x.grad()};
}

}  // namespace

TEST_CASE("fused rotary embedding equals t * cos + rotate_half(t) * sin bit for bit, values and gradients",
          "[unit][kernels]") {
  const int64_t B = 2, T = 37, H = 3, d = 16;
  for (const RotaryCase c : {RotaryCase{torch::kFloat, torch::kFloat, 16, 1}, RotaryCase{torch::kFloat, torch::kFloat, 8, B},
                             RotaryCase{torch::kBFloat16, torch::kBFloat16, 16, B},
                             RotaryCase{torch::kBFloat16, torch::kFloat, 16, 1},
                             RotaryCase{torch::kBFloat16, torch::kBFloat16, 12, 1}}) {
    INFO("heads " << c.head_type << " tables " << c.table_type << " rotary " << c.rotary << " table batch "
                  << c.table_batch);
    torch::manual_seed(c.rotary + c.table_batch);
    const auto x0 = (torch::randn({B, T, H, d}) * 2).to(c.head_type);
    const auto angle = torch::rand({c.table_batch, 1, T, c.rotary / 2}) * 20;
    const auto cos = torch::cat({angle.cos(), angle.cos()}, -1).to(c.table_type);
    const auto sin = torch::cat({angle.sin(), angle.sin()}, -1).to(c.table_type);
    const auto dy = torch::randn({B, H, T, d});
    const int64_t before = kernels::fused_calls(kernels::FusedKernel::kRotary);
    const auto fused = run(c, x0, cos, sin, dy, true);
    CHECK(kernels::fused_calls(kernels::FusedKernel::kRotary) == before + 1);
    const auto ops = run(c, x0, cos, sin, dy, false);
    CHECK(kernels::fused_calls(kernels::FusedKernel::kRotary) == before + 1);
    REQUIRE(fused[0].scalar_type() == ops[0].scalar_type());
    CHECK(fused[0].sizes() == ops[0].sizes());
    CHECK(torch::equal(fused[0], ops[0]));
    CHECK(torch::equal(fused[1], ops[1]));
    // float64 of the same inputs: within the output's rounding.
    const auto x64 = heads_view(x0.to(torch::kDouble)), c64 = cos.to(torch::kDouble), s64 = sin.to(torch::kDouble);
    const auto r = x64.narrow(-1, 0, c.rotary);
    const int64_t h = c.rotary / 2;
    const auto rot = torch::cat({-r.narrow(-1, h, h), r.narrow(-1, 0, h)}, -1);
    const auto want = torch::cat({r * c64 + rot * s64, x64.narrow(-1, c.rotary, d - c.rotary)}, -1);
    const double tol = fused[0].scalar_type() == torch::kBFloat16 ? 1.6e-2 : 1e-6;
    CHECK((fused[0].to(torch::kDouble) - want).abs().max().item<double>() <= tol * want.abs().max().item<double>());
  }
}

TEST_CASE("rotary embedding takes LibTorch's ops for tables that need a gradient or do not fit", "[unit][kernels]") {
  const auto x = torch::randn({1, 2, 5, 8});
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kRotary);
  const auto odd = torch::ones({1, 1, 5, 6});
  CHECK(apply_rotary(x, odd, odd).sizes() == x.sizes());                     // 6 of 8 dims: fits
  CHECK(kernels::fused_calls(kernels::FusedKernel::kRotary) == before + 1);
  const auto wrong_tokens = torch::ones({1, 1, 4, 8});
  CHECK_THROWS(apply_rotary(x, wrong_tokens, wrong_tokens));                  // LibTorch's broadcast refuses it
  auto learned = torch::ones({1, 1, 5, 8}).requires_grad_(true);
  auto y = apply_rotary(x.clone().requires_grad_(true), learned, learned);
  y.sum().backward();
  CHECK(learned.grad().defined());                                            // the ops path differentiates the table
  CHECK(kernels::fused_calls(kernels::FusedKernel::kRotary) == before + 1);
}
