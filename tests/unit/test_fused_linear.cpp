// The linear product over oneDNN's sgemm (models/fused_linear.h) against float64 LibTorch ops: values and the
// gradients of input, weight and bias, for nn.Linear's [out, in] and Conv1D's [in, out] weights, with and
// without bias, 2-D and 3-D inputs, a transposed (non-contiguous) input and empty batches; and the cases that
// must keep LibTorch's ops (autocast, the torch switch, a non-contiguous weight).
#include <catch2/catch.hpp>

#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/kernel_choice.h"
#include "log/run_summary.h"
#include "models/fused_linear.h"
#include "util/autocast.h"

using namespace hftrain;

namespace {

std::string node_name(const torch::Tensor& y) { return y.grad_fn() ? y.grad_fn()->name() : "none"; }

double max_abs(const torch::Tensor& t) { return t.numel() == 0 ? 0.0 : t.abs().max().item<double>(); }

}  // namespace

TEST_CASE("fused linear equals float64 linear in values and every gradient, for both weight layouts", "[unit][kernels]") {
  // install-deps.sh installs libdnnl-dev, so the suite's build has it; a CUDA PyTorch wheel's LibTorch may refuse it
  // (the next test), and then there is nothing to compare.
  if (kCudaBuild && !kernels::gemm_available()) return;
  REQUIRE(kernels::gemm_available());
  struct Case {
    std::vector<int64_t> x_shape;
    int64_t out;
    bool bias, in_out, transposed_x;
  };
  const std::vector<Case> cases = {{{3, 5, 7}, 11, true, false, false}, {{4, 7}, 1, false, false, false},
                                   {{2, 9, 16}, 33, true, true, false}, {{6, 13}, 5, false, true, false},
                                   {{13, 6}, 4, true, false, true},     {{0, 7}, 3, true, false, false},
                                   {{1, 1}, 17, true, true, false}};
  for (const Case& c : cases) {
    const int64_t in = c.transposed_x ? c.x_shape.front() : c.x_shape.back();
    INFO("x " << c.x_shape << " out " << c.out << " bias " << c.bias << " in_out " << c.in_out << " transposed " << c.transposed_x);
    torch::manual_seed(in * 7 + c.out);
    auto x = torch::randn(c.x_shape);
    if (c.transposed_x) x = x.t();  // [6, 13] viewed as [13 rows... ] -> a non-contiguous [6 x 13]^T input
    x.requires_grad_(true);
    auto w = (c.in_out ? torch::randn({in, c.out}) : torch::randn({c.out, in})).requires_grad_(true);
    auto b = c.bias ? torch::randn({c.out}).requires_grad_(true) : torch::Tensor();
    auto y = linear_product(x, w, b, c.in_out);
    CHECK(node_name(y).find("FusedLinear") != std::string::npos);

    auto x64 = x.detach().to(torch::kDouble).requires_grad_(true);
    auto w64 = w.detach().to(torch::kDouble).requires_grad_(true);
    auto b64 = c.bias ? b.detach().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
    auto want = torch::matmul(x64, c.in_out ? w64 : w64.t());
    if (c.bias) want = want + b64;
    REQUIRE(y.sizes() == want.sizes());
    const auto tol = [&](const torch::Tensor& ref) { return 1e-5 * (1.0 + max_abs(ref)); };
    CHECK(max_abs(y.detach().to(torch::kDouble) - want) <= tol(want));
    const auto dy = torch::randn(want.sizes(), torch::kDouble);
    y.backward(dy.to(torch::kFloat));
    want.backward(dy);
    CHECK(max_abs(x.grad().to(torch::kDouble) - x64.grad()) <= tol(x64.grad()));
    CHECK(max_abs(w.grad().to(torch::kDouble) - w64.grad()) <= tol(w64.grad()));
    if (c.bias) CHECK(max_abs(b.grad().to(torch::kDouble) - b64.grad()) <= tol(b64.grad()));
  }
}

TEST_CASE("fused linear leaves autocast, the torch switch and strided weights to LibTorch's ops", "[unit][kernels]") {
  auto x = torch::randn({4, 8}, torch::requires_grad());
  auto w = torch::randn({3, 8}, torch::requires_grad());
  auto b = torch::randn({3}, torch::requires_grad());
  {
    // autocast's own casts and a bf16 product, as torch::linear under autocast (where the CPU multiplies bf16 in
    // hardware; without it see test_bf16_linear.cpp)
    force_bf16_linear_through_fp32(false);
    AutocastScope bf16(torch::kBFloat16);
    const int64_t calls = kernels::fused_calls(kernels::FusedKernel::kBf16Linear);
    const auto y = linear_product(x, w, b);
    CHECK(y.scalar_type() == torch::kBFloat16);
    CHECK(node_name(y).find("FusedLinear") == std::string::npos);
    CHECK(kernels::fused_calls(kernels::FusedKernel::kBf16Linear) == calls);
    force_bf16_linear_through_fp32(std::nullopt);
  }
  kernels::set_fused_kernels_enabled(false);
  CHECK(node_name(linear_product(x, w, b)).find("FusedLinear") == std::string::npos);
  kernels::set_fused_kernels_enabled(true);
  // The output is a tensor of its own: an in-place op on it (or on a view of it) is allowed, as on torch::linear's.
  auto fused_y = linear_product(x.view({2, 2, 8}), w, b);
  REQUIRE(node_name(fused_y).find("FusedLinear") != std::string::npos);
  fused_y.mul_(2.0);
  fused_y.select(0, 1).add_(1.0);
  fused_y.sum().backward();
  CHECK(torch::allclose(b.grad(), torch::full({3}, 8.0f)));
  CHECK(torch::allclose(w.grad(), 2.0 * x.detach().sum(0).expand({3, 8})));
  // A weight with no elements (out = 0) takes LibTorch's op.
  const auto none = linear_product(x, torch::zeros({0, 8}), torch::Tensor());
  CHECK(none.sizes() == torch::IntArrayRef({4, 0}));
  const auto strided = torch::randn({8, 3}, torch::requires_grad()).t();  // a [3, 8] view of a transposed weight
  const auto y = linear_product(x, strided, b);
  CHECK(node_name(y).find("FusedLinear") == std::string::npos);
  CHECK(torch::allclose(y, torch::nn::functional::linear(x, strided, b)));
}

TEST_CASE("the run-start line says how the host's linear layers multiply", "[unit][kernels]") {
  // A CUDA PyTorch wheel's own oneDNN refused dnnl_sgemm ("unimplemented") on a GPU machine: gemm_available()
  // checks a product before the layers rely on it, and the Device line says which path they take.
  const bool was_enabled = kernels::fused_kernels_enabled();
  kernels::set_fused_kernels_enabled(true);
  CHECK_THAT(describe_compute(), Catch::Contains("; linear layers on the host: " + kernels::gemm_description() + ")"));
  if (kernels::gemm_available()) {
    CHECK(kernels::gemm_description() ==
          (simd::cpu_has_bf16_gemm() ? "oneDNN sgemm" : "oneDNN sgemm, bf16 ones too (no bf16 multiply on this CPU)"));
    torch::manual_seed(4);  // what "available" promises: products equal to LibTorch's
    const auto a = torch::randn({7, 5}), b = torch::randn({9, 5});
    auto c = torch::empty({7, 9});
    kernels::sgemm(false, true, 7, 9, 5, 1.0f, a.data_ptr<float>(), 5, b.data_ptr<float>(), 5, 0.0f, c.data_ptr<float>(), 9);
    CHECK(torch::allclose(c, torch::mm(a, b.t()), 1e-5, 1e-6));
  } else {
    CHECK_THAT(kernels::gemm_description(), Catch::StartsWith("LibTorch's matmul ("));
  }
  kernels::set_fused_kernels_enabled(false);  // HFTRAIN_KERNELS=torch: the line says LibTorch's matmul
  CHECK(kernels::gemm_description() == "LibTorch's matmul (HFTRAIN_KERNELS=torch)");
  kernels::set_fused_kernels_enabled(was_enabled);
}
