// Adam / AdamW over lists of tensors (optim/adam_foreach.h), the path of a GPU's parameters, against torch 1.13's
// single-tensor algorithm written out here op by op (torch/optim/adamw.py, _single_tensor_adamw; adam.py for
// the L2 form). Strided CPU parameters take the list path (the kernels take contiguous ones only), so the CPU
// build checks it; it must agree bit for bit, also when parameters of one group are at different step counts.
#include <catch2/catch.hpp>

#include <cmath>

#include "optim/adam.h"

using namespace hftrain;

namespace {

struct Reference {
  torch::Tensor param, exp_avg, exp_avg_sq;
  int64_t step = 0;
};

void reference_step(Reference& r, const torch::Tensor& grad_in, double lr, double wd, bool decoupled, const OptimizerHyper& h) {
  torch::NoGradGuard no_grad;
  if (!r.exp_avg.defined()) {
    r.exp_avg = torch::zeros_like(r.param);
    r.exp_avg_sq = torch::zeros_like(r.param);
  }
  r.step += 1;
  torch::Tensor grad = grad_in;
  if (decoupled) r.param.mul_(1 - lr * wd);
  else if (wd != 0) grad = grad.add(r.param, wd);
  r.exp_avg.mul_(h.beta1).add_(grad, 1 - h.beta1);
  r.exp_avg_sq.mul_(h.beta2).addcmul_(grad, grad, 1 - h.beta2);
  const double bias_correction1 = 1 - std::pow(h.beta1, static_cast<double>(r.step));
  const double bias_correction2 = 1 - std::pow(h.beta2, static_cast<double>(r.step));
  const double step_size = lr / bias_correction1;
  auto denom = (r.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(h.eps);
  r.param.addcdiv_(r.exp_avg, denom, -step_size);
}

// A strided (transposed) leaf parameter of shape [cols, rows] on `device`.
torch::Tensor strided_param(int64_t rows, int64_t cols, torch::Device device) {
  return torch::randn({rows, cols}).to(device).t().detach().requires_grad_(true);
}

// On the CPU the list ops are the single-tensor ops (bit for bit); on a GPU they are LibTorch's multi-tensor
// kernels, whose division of the denominator may differ in a last bit (adam_foreach.h).
void check_against_reference(bool decoupled, torch::Device device = torch::kCPU) {
  torch::manual_seed(21);
  OptimizerHyper hyper;
  hyper.beta1 = 0.8;
  hyper.beta2 = 0.95;
  hyper.eps = 1e-6;
  ParamGroup group;
  group.names = {"a", "b", "c", "contiguous"};
  group.params = {strided_param(5, 7, device), strided_param(3, 2, device), strided_param(2, 9, device),
                  torch::randn({4, 3}).to(device).requires_grad_(true)};
  group.weight_decay = 0.1;
  REQUIRE_FALSE(group.params[0].is_contiguous());
  std::vector<Reference> refs;
  for (const auto& p : group.params) refs.push_back({p.detach().clone(), {}, {}, 0});
  std::unique_ptr<Optimizer> opt;
  if (decoupled) opt = std::make_unique<AdamW>(AdamW::Options{}, std::vector<ParamGroup>{group}, hyper);
  else opt = std::make_unique<Adam>(Adam::Options{}, std::vector<ParamGroup>{group}, hyper);
  const double lrs[3] = {1e-2, 5e-3, 2e-2};
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& p = group.params[i];
      if (step == 1 && i == 1) {  // "b" has no gradient this step: it is not stepped, its count lags
        p.mutable_grad() = torch::Tensor();
        continue;
      }
      p.mutable_grad() = torch::randn(p.sizes()).to(device).t().contiguous().t();  // a gradient with the parameter's strides
      if (p.is_contiguous()) p.mutable_grad() = p.grad().contiguous();
      reference_step(refs[i], p.grad(), lrs[step], group.weight_decay, decoupled, hyper);
    }
    opt->step(lrs[step]);
  }
  const auto state = opt->state();
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const std::string& name = group.names[i];
    INFO(name << (decoupled ? " adamw" : " adam"));
    CHECK(state.at(name + ".step").item<int64_t>() == refs[i].step);
    if (group.params[i].is_contiguous() || !device.is_cpu()) {  // kernels, or a GPU's list ops: the same math
      CHECK(torch::allclose(group.params[i].detach(), refs[i].param, 1e-6, 1e-7));
      continue;
    }
    CHECK(torch::equal(group.params[i].detach(), refs[i].param));
    CHECK(torch::equal(state.at(name + ".exp_avg"), refs[i].exp_avg));
    CHECK(torch::equal(state.at(name + ".exp_avg_sq"), refs[i].exp_avg_sq));
  }
  CHECK(refs[1].step == 2);
}

}  // namespace

TEST_CASE("AdamW over tensor lists equals torch's single-tensor AdamW bit for bit, steps counted per parameter",
          "[unit][optim]") {
  check_against_reference(/*decoupled=*/true);
}

TEST_CASE("Adam over tensor lists equals torch's single-tensor Adam with L2 weight decay bit for bit", "[unit][optim]") {
  check_against_reference(/*decoupled=*/false);
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("AdamW and Adam over tensor lists on the GPU follow torch's single-tensor algorithm", "[gpu][optim]") {
  REQUIRE(torch::cuda::is_available());
  check_against_reference(/*decoupled=*/true, torch::Device(torch::kCUDA, 0));
  check_against_reference(/*decoupled=*/false, torch::Device(torch::kCUDA, 0));
}
#endif
