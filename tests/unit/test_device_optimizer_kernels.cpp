// The optimizer kernels over a stream on one device against the documented formulas in float64 on the host
// (optim/kernels/update_kernels.h: torch's Adam / AdamW, SGD with momentum, Lion, Adagrad): every gradient type, the
// gradient scale and the 16-bit output. With a GPU (`[gpu]`, hftrain_gpu_tests) the streams are on cuda:0 and the
// CUDA updates run; on the host (`[unit]`) the same checks run the host kernels.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>

#include "kernels/cuda_launch.h"
#include "optim/kernels/update_kernels.h"
#include "optim/step_tensors.h"

using namespace hftrain;

namespace {

constexpr int64_t kN = 10007;  // not a multiple of any lane or block

double rel(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kCPU).to(torch::kDouble) - want).abs().max().item<double>() /
         std::max(1e-12, want.abs().max().item<double>());
}

struct Inputs {
  torch::Tensor param, grad, out16, s0, s1;  // on the device
  optim_kernels::Stream stream;
};

Inputs inputs_on(torch::Device device, torch::ScalarType grad_type, std::optional<torch::ScalarType> out_type,
                 double grad_scale) {
  torch::manual_seed(11);
  Inputs in;
  in.param = torch::randn({kN}).to(device);
  in.grad = (torch::randn({kN}) * 0.1).to(grad_type).to(device);
  if (out_type) in.out16 = torch::zeros({kN}, torch::TensorOptions().dtype(*out_type)).to(device);
  in.s0 = (torch::randn({kN}) * 0.01).to(device);
  in.s1 = (torch::rand({kN}) * 0.001).to(device);
  StepTensors t;
  t.grad = in.grad;
  t.out16 = in.out16;
  REQUIRE(kernel_stream(in.param, t, grad_scale, &in.stream));
  CHECK(in.stream.on_cuda == device.is_cuda());
  REQUIRE(kernel_state(in.s0, in.stream));
  REQUIRE(kernel_state(in.s1, in.stream));
  return in;
}

torch::Tensor h64(const torch::Tensor& t) { return t.to(torch::kCPU).to(torch::kDouble); }

void check_adam(torch::Device device, torch::ScalarType grad_type, std::optional<torch::ScalarType> out_type) {
  INFO("grad " << grad_type << " out16 " << (out_type ? c10::toString(*out_type) : "none"));
  const double scale = 0.5, lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, step = 3;
  Inputs in = inputs_on(device, grad_type, out_type, scale);
  auto p = h64(in.param), g = h64(in.grad) * scale, m = h64(in.s0), v = h64(in.s1);
  optim_kernels::AdamCoef c;
  c.decay = static_cast<float>(1 - lr * wd);  // AdamW
  c.beta1 = static_cast<float>(b1);
  c.beta2 = static_cast<float>(b2);
  c.one_minus_beta1 = static_cast<float>(1 - b1);
  c.one_minus_beta2 = static_cast<float>(1 - b2);
  c.step_size = static_cast<float>(lr / (1 - std::pow(b1, step)));
  c.inv_bias_correction2_sqrt = static_cast<float>(1 / std::sqrt(1 - std::pow(b2, step)));
  c.eps = static_cast<float>(eps);
  optim_kernels::adam_update(in.stream, in.s0.data_ptr<float>(), in.s1.data_ptr<float>(), c);
  p = p * (1 - lr * wd);
  m = b1 * m + (1 - b1) * g;
  v = b2 * v + (1 - b2) * g * g;
  p = p - lr / (1 - std::pow(b1, step)) * m / (v.sqrt() / std::sqrt(1 - std::pow(b2, step)) + eps);
  CHECK(rel(in.param, p) < 1e-6);
  CHECK(rel(in.s0, m) < 1e-6);
  CHECK(rel(in.s1, v) < 1e-6);
  if (out_type) CHECK(torch::equal(in.out16.to(torch::kCPU), in.param.to(torch::kCPU).to(*out_type)));
}

void check_others(torch::Device device) {
  const double lr = 1e-2, wd = 0.01;
  {  // SGD with momentum 0.9, dampening 0.1, nesterov, a buffer from an earlier step
    Inputs in = inputs_on(device, torch::kFloat, std::nullopt, 1.0);
    auto p = h64(in.param), g = h64(in.grad), buf = h64(in.s0);
    optim_kernels::SgdCoef c;
    c.lr = static_cast<float>(lr);
    c.weight_decay = static_cast<float>(wd);
    c.momentum = 0.9f;
    c.one_minus_dampening = 0.9f;
    c.nesterov = true;
    optim_kernels::sgd_update(in.stream, in.s0.data_ptr<float>(), c);
    auto d = g + wd * p;
    buf = 0.9 * buf + 0.9 * d;
    d = d + 0.9 * buf;
    CHECK(rel(in.param, p - lr * d) < 1e-6);
    CHECK(rel(in.s0, buf) < 1e-6);
  }
  {  // Lion
    Inputs in = inputs_on(device, torch::kBFloat16, torch::kBFloat16, 2.0);
    auto p = h64(in.param), g = h64(in.grad) * 2.0, m = h64(in.s0);
    optim_kernels::LionCoef c;
    c.lr = static_cast<float>(lr);
    c.decay = static_cast<float>(1 - lr * wd);
    optim_kernels::lion_update(in.stream, in.s0.data_ptr<float>(), c);
    const auto direction = (0.9 * m + 0.1 * g).sign();
    CHECK(rel(in.param, p * (1 - lr * wd) - lr * direction) < 1e-6);
    CHECK(rel(in.s0, 0.99 * m + 0.01 * g) < 1e-6);
    CHECK(torch::equal(in.out16.to(torch::kCPU), in.param.to(torch::kCPU).to(torch::kBFloat16)));
  }
  {  // Adagrad
    Inputs in = inputs_on(device, torch::kHalf, std::nullopt, 1.0);
    auto p = h64(in.param), g = h64(in.grad), sum = h64(in.s1);
    optim_kernels::AdagradCoef c;
    c.clr = static_cast<float>(lr);
    c.weight_decay = static_cast<float>(wd);
    optim_kernels::adagrad_update(in.stream, in.s1.data_ptr<float>(), c);
    g = g + wd * p;
    sum = sum + g * g;
    CHECK(rel(in.param, p - lr * g / (sum.sqrt() + 1e-10)) < 1e-6);
    CHECK(rel(in.s1, sum) < 1e-6);
  }
}

void check_all_optimizers_on(torch::Device device) {
  for (const auto grad_type : {torch::kFloat, torch::kBFloat16, torch::kHalf})
    for (const auto out_type : {std::optional<torch::ScalarType>(), std::optional<torch::ScalarType>(torch::kBFloat16),
                                std::optional<torch::ScalarType>(torch::kHalf)})
      check_adam(device, grad_type, out_type);
  check_others(device);
}

}  // namespace

TEST_CASE("device optimizer kernels: host streams follow the float64 formulas, the checks the CUDA updates take",
          "[unit][optim]") {
  check_all_optimizers_on(torch::kCPU);
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("device optimizer kernels: the CUDA updates follow the float64 formulas, every gradient and output type",
          "[gpu][optim]") {
  REQUIRE(torch::cuda::is_available());
  INFO(kernels::cuda_kernels_unusable());
  REQUIRE(optim_kernels::cuda_updates_usable());
  check_all_optimizers_on(torch::Device(torch::kCUDA, 0));
}
#endif
