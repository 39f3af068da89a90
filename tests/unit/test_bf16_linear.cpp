// bf16 linear layers multiplied in fp32 on a CPU without bf16 instructions (models/fused_linear.h): the output and
// the gradients against float64 products of the same bf16-rounded operands (what a bf16 GEMM with fp32
// accumulation computes, rounded once to bf16), beside LibTorch's own bf16 linear held to the same bound; both
// weight layouts, with and without bias, fp32 and bf16 inputs; the switches that keep LibTorch's op; and a
// whole gpt2 forward and backward under bf16 autocast either way.
#include <catch2/catch.hpp>

#include "kernels/gemm.h"
#include "kernels/kernel_choice.h"
#include "models/fused_linear.h"
#include "seq2seq_model_helpers.h"
#include "util/autocast.h"

using namespace hftrain;

namespace {

torch::Tensor round_bf16(const torch::Tensor& t) { return t.detach().to(torch::kBFloat16).to(torch::kDouble); }

// |got - want| <= half a bf16 ulp of want (the final rounding) plus fp32 accumulation error over `terms`, per element.
void check_bf16_faithful(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& terms) {
  REQUIRE(got.sizes() == want.sizes());
  const auto bound = want.abs() * std::ldexp(1.0, -8) + terms * 1e-6 + 1e-30;
  const auto excess = (got.to(torch::kDouble) - want).abs() - bound;
  CHECK(excess.max().item<double>() <= 0.0);
}

struct Result {
  torch::Tensor y, dx, dw, db;
  int64_t through_fp32 = 0;  // calls that took the fp32 path
};

Result run(const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& b0, bool in_out, const torch::Tensor& dy,
           bool through_fp32) {
  force_bf16_linear_through_fp32(through_fp32);
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  auto b = b0.defined() ? b0.clone().requires_grad_(true) : torch::Tensor();
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kBf16Linear);
  Result r;
  {
    AutocastScope autocast(torch::kBFloat16);
    r.y = linear_product(x, w, b, in_out);
  }
  r.y.backward(dy);
  r.through_fp32 = kernels::fused_calls(kernels::FusedKernel::kBf16Linear) - before;
  r.dx = x.grad();
  r.dw = w.grad();
  if (b.defined()) r.db = b.grad();
  force_bf16_linear_through_fp32(std::nullopt);
  return r;
}

}  // namespace

TEST_CASE("bf16 linear layers multiplied in fp32 round like a bf16 GEMM, values and gradients, both weight layouts",
          "[unit][kernels]") {
  if (!kernels::gemm_available()) return;  // a CUDA wheel's LibTorch may refuse oneDNN's sgemm: LibTorch's op then
  struct Case {
    std::vector<int64_t> x_shape;
    int64_t out;
    bool bias, in_out;
    torch::ScalarType x_dtype, w_dtype;
  };
  const std::vector<Case> cases = {{{3, 5, 40}, 24, true, false, torch::kFloat, torch::kBFloat16},
                                   {{7, 33}, 9, false, false, torch::kBFloat16, torch::kBFloat16},
                                   {{2, 6, 32}, 48, true, true, torch::kFloat, torch::kBFloat16},
                                   {{4, 17}, 5, true, false, torch::kFloat, torch::kFloat}};
  for (const Case& c : cases) {
    const int64_t in = c.x_shape.back();
    INFO("x " << c.x_shape << " out " << c.out << " bias " << c.bias << " in_out " << c.in_out);
    torch::manual_seed(in + c.out);
    const auto x = torch::randn(c.x_shape).to(c.x_dtype);
    const auto w = (c.in_out ? torch::randn({in, c.out}) : torch::randn({c.out, in})).to(c.w_dtype);
    const auto b = c.bias ? torch::randn({c.out}).to(c.w_dtype) : torch::Tensor();
    auto out_shape = c.x_shape;
    out_shape.back() = c.out;
    const auto dy = torch::randn(out_shape).to(torch::kBFloat16);

    // What autocast's bf16 linear computes, in float64 over the rounded operands.
    const auto xb = round_bf16(x).reshape({-1, in}), wb = round_bf16(w), dyb = round_bf16(dy).reshape({-1, c.out});
    const auto w_oi = c.in_out ? wb.t() : wb;  // [out, in]
    auto want_y = torch::mm(xb, w_oi.t());
    if (c.bias) want_y = want_y + round_bf16(b);
    const auto y_terms = torch::mm(xb.abs(), w_oi.abs().t());
    const auto want_dx = torch::mm(dyb, w_oi), dx_terms = torch::mm(dyb.abs(), w_oi.abs());
    auto want_dw = torch::mm(dyb.t(), xb), dw_terms = torch::mm(dyb.abs().t(), xb.abs());  // [out, in]
    if (c.in_out) {
      want_dw = want_dw.t();
      dw_terms = dw_terms.t();
    }

    const Result r = run(x, w, b, c.in_out, dy, /*through_fp32=*/true);
    CHECK(r.through_fp32 == 1);
    CHECK(r.y.scalar_type() == torch::kBFloat16);
    CHECK(r.dx.scalar_type() == c.x_dtype);  // each gradient in its input's dtype, through autocast's cast
    CHECK(r.dw.scalar_type() == c.w_dtype);
    check_bf16_faithful(r.y.reshape({-1, c.out}), want_y, y_terms);
    check_bf16_faithful(r.dx.reshape({-1, in}), want_dx, dx_terms);
    check_bf16_faithful(r.dw, want_dw, dw_terms);
    if (c.bias) check_bf16_faithful(r.db, dyb.sum(0), dyb.abs().sum(0));
    // LibTorch 1.13's bf16 linear on a CPU without bf16 instructions misses the bound above (by up to 0.02 here:
    // its emulated GEMMs round more than once); it agrees with the fp32 products to within 2^-6 of the terms.
    const Result lib = run(x, w, b, c.in_out, dy, /*through_fp32=*/false);
    CHECK(lib.through_fp32 == 0);
    auto close = [](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& terms) {
      const auto diff = (a.to(torch::kDouble).reshape(terms.sizes()) - b.to(torch::kDouble).reshape(terms.sizes())).abs();
      CHECK((diff - terms * std::ldexp(1.0, -6)).max().item<double>() <= 1e-6);
    };
    close(lib.y, r.y, y_terms);
    close(lib.dx, r.dx, dx_terms);
    close(lib.dw, r.dw, dw_terms);
  }
}

TEST_CASE("bf16 linear layers keep LibTorch's op without autocast, with the torch switch, or when told the CPU has bf16",
          "[unit][kernels]") {
  const auto x = torch::randn({4, 8}), w = torch::randn({3, 8}).to(torch::kBFloat16), dy = torch::randn({4, 3});
  CHECK(run(x, w, {}, false, dy.to(torch::kBFloat16), /*through_fp32=*/false).through_fp32 == 0);
  kernels::set_fused_kernels_enabled(false);
  CHECK(run(x, w, {}, false, dy.to(torch::kBFloat16), /*through_fp32=*/true).through_fp32 == 0);
  kernels::set_fused_kernels_enabled(true);
  force_bf16_linear_through_fp32(true);
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kBf16Linear);
  (void)linear_product(x, w.to(torch::kFloat), torch::Tensor());  // no autocast: the fp32 product
  CHECK(kernels::fused_calls(kernels::FusedKernel::kBf16Linear) == before);
  force_bf16_linear_through_fp32(std::nullopt);
}

TEST_CASE("gpt2 under bf16 autocast gives the same loss and gradients to bf16 precision with the fp32 products",
          "[unit][kernels]") {
  if (!kernels::gemm_available()) return;
  auto model = hftrain_test::build_model("gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, "
                                                 "resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}",
                                         /*seed=*/3);
  model->train();
  torch::manual_seed(8);
  Batch batch;
  batch.input_ids = torch::randint(0, 29, {2, 12}, torch::kLong);
  batch.labels = batch.input_ids.clone();
  auto loss_and_grads = [&](bool through_fp32) {
    force_bf16_linear_through_fp32(through_fp32);
    model->zero_grad();
    torch::Tensor loss;
    {
      AutocastScope autocast(torch::kBFloat16);
      loss = model->forward(batch).loss;
    }
    loss.backward();
    std::map<std::string, torch::Tensor> r = {{"loss", loss.detach().to(torch::kFloat)}};
    for (const auto& np : model->named_parameters()) r[np.key()] = np.value().grad().to(torch::kFloat);
    force_bf16_linear_through_fp32(std::nullopt);
    return r;
  };
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kBf16Linear);
  const auto fp32_products = loss_and_grads(true);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kBf16Linear) - before >= 8);  // every block's four linears
  const auto bf16_products = loss_and_grads(false);
  CHECK(fp32_products.at("loss").item<double>() == Approx(bf16_products.at("loss").item<double>()).epsilon(1e-2));
  for (const auto& [name, want] : bf16_products) {
    INFO(name);
    const double scale = std::max(1e-3, want.abs().max().item<double>());
    CHECK((fp32_products.at(name) - want).abs().max().item<double>() <= 0.05 * scale);  // bf16 runs: ~8 bits each
  }
}

TEST_CASE("the chunked LM loss's bf16 products run in fp32 too, rounded as a bf16 GEMM's, dW accumulated in fp32",
          "[unit][kernels]") {
  if (!kernels::gemm_available()) return;
  torch::manual_seed(12);
  const auto a = torch::randn({9, 40}).to(torch::kBFloat16), b = torch::randn({40, 13}).to(torch::kBFloat16);
  const auto a64 = round_bf16(a), b64 = round_bf16(b);
  const auto terms = torch::mm(a64.abs(), b64.abs());
  force_bf16_linear_through_fp32(true);
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kBf16Linear);
  // into a bf16 c, and added to one (beta 1): one rounding of the fp32 sum
  torch::Tensor c = torch::empty({9, 13}, torch::kBFloat16);
  matmul_into(c, a, false, b, false, 0.0f);
  check_bf16_faithful(c, torch::mm(a64, b64), terms);
  torch::Tensor acc = torch::randn({9, 13}).to(torch::kBFloat16);
  const auto acc64 = round_bf16(acc);
  matmul_into(acc, a, false, b, false, 1.0f);
  check_bf16_faithful(acc, acc64 + torch::mm(a64, b64), terms + acc64.abs());
  // transposed operands into an fp32 c: accumulated in fp32, no rounding to bf16
  torch::Tensor c32 = torch::ones({40, 40});
  matmul_into(c32, a, true, a, false, 1.0f);
  const auto want32 = 1.0 + torch::mm(a64.t(), a64);
  CHECK(((c32.to(torch::kDouble) - want32).abs() - torch::mm(a64.abs().t(), a64.abs()) * 1e-6).max().item<double>() <= 1e-6);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kBf16Linear) - before == 3);
  // LibTorch's product when the CPU multiplies bf16 itself: the same values to bf16 precision
  force_bf16_linear_through_fp32(false);
  torch::Tensor lib = torch::empty({9, 13}, torch::kBFloat16);
  matmul_into(lib, a, false, b, false, 0.0f);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kBf16Linear) - before == 3);
  CHECK(((lib.to(torch::kDouble) - c.to(torch::kDouble)).abs() - terms * std::ldexp(1.0, -6)).max().item<double>() <= 1e-6);
  torch::Tensor lib32 = torch::ones({40, 40});
  matmul_into(lib32, a, true, a, false, 1.0f);  // mixed dtypes: the bf16 product converted and added
  CHECK(((lib32.to(torch::kDouble) - want32).abs() - torch::mm(a64.abs().t(), a64.abs()) * std::ldexp(1.0, -6)).max().item<double>() <= 1e-6);
  force_bf16_linear_through_fp32(std::nullopt);
}
