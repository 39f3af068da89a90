// The optimizer kernels (optim/kernels) against torch's op-by-op float32 computation of the same torch.optim
// formulas: every kernel, on every instruction set this CPU runs, on odd sizes (tails shorter than a vector),
// with fp32 / bf16 / fp16 gradients, a gradient scale, 16-bit write-back (compared bit for bit with torch's
// own conversion of the updated parameter), zero, huge and subnormal values and NaN.
#include <catch2/catch.hpp>

#include <cmath>

#include "optim/kernels/update_kernels.h"
#include "util/torch_compat.h"

using namespace hftrain;
namespace ok = hftrain::optim_kernels;

namespace {

// Both fp32 computations round at most ~8 times along the update, each by at most 2^-24 relative; the kernels
// also fuse multiply-adds. So they agree to a few ulp of the value plus ~1e-6 of the change the step made.
// Subnormal intermediates have only absolute precision (2^-149 ~ 1.4e-45); Adam divides a subnormal moment by
// eps = 1e-8 and multiplies by the step size (~0.05), which turns a few of those ulps into ~1e-37: hence 1e-36.
// Where terms cancel (SGD's g + wd*p, Lion's moment), the rounding is relative to the operands: `magnitude`
// (|g| + |p| of the step) adds 1e-6 of it.
void check_close(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& before,
                 const torch::Tensor& magnitude, const char* what) {
  INFO(what);
  const auto g = got.to(torch::kDouble), w = want.to(torch::kDouble), b = before.to(torch::kDouble);
  const auto both_nan = torch::isnan(g) & torch::isnan(w);
  const auto same_inf = torch::isinf(w) & (g == w);
  const auto tol = w.abs() * 5e-7 + (w - b).abs().nan_to_num(0, 0, 0) * 2e-6 +
                   magnitude.to(torch::kDouble).nan_to_num(0, 0, 0) * 1e-6 + 1e-36;
  const auto close = torch::isfinite(w) & torch::isfinite(g) & ((g - w).abs() <= tol);
  const auto ok_mask = close.logical_or(both_nan).logical_or(same_inf);
  const bool all = ok_mask.all().item<bool>();
  if (!all) {
    const auto bad = (~ok_mask).nonzero().reshape({-1});
    const int64_t i = bad[0].item<int64_t>();
    INFO("first mismatch at " << i << ": got " << g[i].item<double>() << ", want " << w[i].item<double>());
    CHECK(all);
  }
}

torch::ScalarType torch_type(ok::ElementType t) {
  return t == ok::ElementType::kF32 ? torch::kFloat : t == ok::ElementType::kBF16 ? torch::kBFloat16 : torch::kHalf;
}

// Values for n elements with the special cases at fixed places: zeros, huge, subnormal (for fp32 / bf16).
torch::Tensor values(int64_t n, double scale, ok::ElementType type, bool special) {
  auto t = torch::randn({n}) * scale;
  if (special && n >= 8) {
    const bool fp16 = type == ok::ElementType::kF16;
    t[0] = 0.0;
    t[1] = fp16 ? 60000.0 : 1e19;  // g*g stays finite in fp32
    t[2] = fp16 ? -6e-8 : 1e-40;   // subnormal
    t[3] = fp16 ? 1e-5 : -3e30;    // g*g overflows in fp32 (not fp16's range)
  }
  return t.to(torch_type(type));
}

ok::Stream stream(torch::Tensor& p, const torch::Tensor& g, torch::Tensor* out16, ok::ElementType grad_type,
                  ok::ElementType out_type, float scale) {
  ok::Stream s;
  s.param = p.data_ptr<float>();
  s.grad = g.data_ptr();
  s.grad_type = grad_type;
  if (out16 != nullptr) {
    s.out16 = static_cast<uint16_t*>(out16->data_ptr());
    s.out_type = out_type;
  }
  s.grad_scale = scale;
  s.n = p.numel();
  return s;
}

struct Setup {
  int64_t n;
  ok::ElementType grad_type;
  bool write16;
  ok::ElementType out_type;
  float scale;
  bool special;
};

std::string label(const Setup& c) {
  auto name = [](ok::ElementType t) { return t == ok::ElementType::kF32 ? "fp32" : t == ok::ElementType::kBF16 ? "bf16" : "fp16"; };
  return "n=" + std::to_string(c.n) + " grad " + name(c.grad_type) + (c.write16 ? std::string(" out ") + name(c.out_type) : "") +
         " scale " + std::to_string(c.scale) + (c.special ? " special values" : "");
}

std::vector<Setup> setups() {
  std::vector<Setup> out;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 4097})
    for (auto gt : {ok::ElementType::kF32, ok::ElementType::kBF16, ok::ElementType::kF16})
      for (int w = 0; w < 3; ++w)
        for (float scale : {1.0f, 0.37f})
          out.push_back({n, gt, w > 0, w == 2 ? ok::ElementType::kF16 : ok::ElementType::kBF16, scale, n >= 8 && scale == 1.0f});
  return out;
}

// Runs `kernel` (the kernel call) and `reference` (torch ops) for two steps from the same inputs and compares.
// `state` lists the state tensors (fp32), updated by both.
template <class Kernel, class Reference>
void compare(const Setup& c, int n_state, double state_init, Kernel kernel, Reference reference) {
  torch::NoGradGuard no_grad;
  auto p = values(c.n, 1.0, ok::ElementType::kF32, c.special);
  if (c.special) p[4] = 1e-39;  // subnormal parameter
  auto p_ref = p.clone();
  std::vector<torch::Tensor> st, st_ref;
  for (int k = 0; k < n_state; ++k) {
    st.push_back(torch::full({c.n}, state_init));
    st_ref.push_back(st.back().clone());
  }
  for (int step = 1; step <= 2; ++step) {
    INFO("step " << step);
    const auto g = values(c.n, 0.1, c.grad_type, c.special);
    const auto g_ref = g.to(torch::kFloat).mul(c.scale);  // torch: unscale the fp32 copy
    torch::Tensor out16 = torch::full({c.n}, 0.5, torch_type(c.out_type));
    const auto before = p_ref.clone();
    std::vector<torch::Tensor> st_before;
    for (auto& s : st_ref) st_before.push_back(s.clone());
    auto s = stream(p, g, c.write16 ? &out16 : nullptr, c.grad_type, c.out_type, c.scale);
    kernel(s, st, step);
    reference(p_ref, g_ref, st_ref, step);
    const auto magnitude = g_ref.abs() + before.abs();
    check_close(p, p_ref, before, magnitude, "parameter");
    for (int k = 0; k < n_state; ++k) check_close(st[static_cast<std::size_t>(k)], st_ref[static_cast<std::size_t>(k)],
                                                  st_before[static_cast<std::size_t>(k)], magnitude, "state");
    if (c.write16) {  // bit for bit torch's rounding of our fp32 result, NaN as NaN
      const auto want = p.to(torch_type(c.out_type));
      const auto eq = (out16 == want).logical_or(torch::isnan(out16) & torch::isnan(want));
      CHECK(eq.all().item<bool>());
    }
    // The next step starts both sides from the kernel's values, so that each step is checked on its own (a
    // subnormal moment divided by eps would otherwise carry one step's rounding into the next, amplified).
    p_ref.copy_(p);
    for (int k = 0; k < n_state; ++k) st_ref[static_cast<std::size_t>(k)].copy_(st[static_cast<std::size_t>(k)]);
  }
}

template <class Fn>
void for_each_isa(Fn fn) {
  for (const auto& isa : ok::supported_isas()) {
    INFO("instruction set " << isa);
    ok::set_isa(isa);
    CHECK(ok::active_isa() == isa);
    fn();
  }
  ok::set_isa("");
}

}  // namespace

TEST_CASE("optimizer kernels: dispatch lists what this CPU runs and refuses the rest", "[unit][optim]") {
  const auto isas = ok::supported_isas();
  REQUIRE_FALSE(isas.empty());
  CHECK(isas.back() == "scalar");
  CHECK_THROWS(ok::set_isa("no-such-isa"));
  ok::set_isa("scalar");
  CHECK(ok::describe_kernels().rfind("scalar, ", 0) == 0);
  ok::set_isa("");
  CHECK(ok::active_isa() == isas.front());  // without HFTRAIN_OPTIM_ISA: the best one
}

TEST_CASE("optimizer kernels: adamw and adam match torch's op-by-op update", "[unit][optim]") {
  for (bool decoupled : {true, false}) {
    INFO((decoupled ? "adamw" : "adam"));
    for_each_isa([&] {
      for (const Setup& c : setups()) {
        INFO(label(c));
        torch::manual_seed(11);
        const double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        auto coef = [&](int step) {
          ok::AdamCoef k;
          k.decay = static_cast<float>(decoupled ? 1 - lr * wd : 1.0);
          k.l2 = static_cast<float>(decoupled ? 0.0 : wd);
          k.beta1 = static_cast<float>(b1);
          k.beta2 = static_cast<float>(b2);
          k.one_minus_beta1 = static_cast<float>(1 - b1);
          k.one_minus_beta2 = static_cast<float>(1 - b2);
          k.step_size = static_cast<float>(lr / (1 - std::pow(b1, step)));
          k.inv_bias_correction2_sqrt = 1.0f / static_cast<float>(std::sqrt(1 - std::pow(b2, step)));
          k.eps = static_cast<float>(eps);
          return k;
        };
        compare(
            c, 2, 0.0,
            [&](const ok::Stream& s, std::vector<torch::Tensor>& st, int step) {
              ok::adam_update(s, st[0].data_ptr<float>(), st[1].data_ptr<float>(), coef(step));
            },
            [&](torch::Tensor& p, torch::Tensor g, std::vector<torch::Tensor>& st, int step) {
              // torch 1.13 _single_tensor_adamw / _single_tensor_adam
              if (decoupled) p.mul_(1 - lr * wd);
              else g = g.add(p, wd);
              st[0].mul_(b1).add_(g, 1 - b1);
              st[1].mul_(b2).addcmul_(g, g, 1 - b2);
              const double bc2_sqrt = std::sqrt(1 - std::pow(b2, step));
              auto denom = (st[1].sqrt() / bc2_sqrt).add_(eps);
              p.addcdiv_(st[0], denom, -lr / (1 - std::pow(b1, step)));
            });
      }
    });
  }
}

TEST_CASE("optimizer kernels: sgd (plain, momentum with dampening, nesterov) matches torch's op-by-op update",
          "[unit][optim]") {
  struct Sgd {
    double momentum, dampening;
    bool nesterov;
  };
  for (const Sgd& o : {Sgd{0, 0, false}, Sgd{0.9, 0.1, false}, Sgd{0.9, 0, true}}) {
    INFO("momentum " << o.momentum << " dampening " << o.dampening << " nesterov " << o.nesterov);
    for_each_isa([&] {
      for (const Setup& c : setups()) {
        INFO(label(c));
        torch::manual_seed(12);
        const double lr = 0.05, wd = 0.01;
        compare(
            c, o.momentum != 0 ? 1 : 0, 0.0,
            [&](const ok::Stream& s, std::vector<torch::Tensor>& st, int step) {
              ok::SgdCoef k;
              k.lr = static_cast<float>(lr);
              k.weight_decay = static_cast<float>(wd);
              k.momentum = static_cast<float>(o.momentum);
              k.one_minus_dampening = static_cast<float>(1 - o.dampening);
              k.nesterov = o.nesterov;
              k.first = step == 1;
              ok::sgd_update(s, st.empty() ? nullptr : st[0].data_ptr<float>(), k);
            },
            [&](torch::Tensor& p, torch::Tensor g, std::vector<torch::Tensor>& st, int step) {
              // torch 1.13 _single_tensor_sgd
              auto d = g.add(p, wd);
              if (o.momentum != 0) {
                if (step == 1) st[0].copy_(d);
                else st[0].mul_(o.momentum).add_(d, 1 - o.dampening);
                d = o.nesterov ? d.add(st[0], o.momentum) : st[0];
              }
              p.add_(d, -lr);
            });
      }
    });
  }
}

TEST_CASE("optimizer kernels: lion matches its op-by-op update", "[unit][optim]") {
  for_each_isa([&] {
    for (const Setup& c : setups()) {
      INFO(label(c));
      torch::manual_seed(13);
      const double lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.99;
      compare(
          c, 1, 0.0,
          [&](const ok::Stream& s, std::vector<torch::Tensor>& st, int) {
            ok::LionCoef k;
            k.lr = static_cast<float>(lr);
            k.decay = static_cast<float>(1 - lr * wd);
            k.beta1 = static_cast<float>(b1);
            k.one_minus_beta1 = static_cast<float>(1 - b1);
            k.beta2 = static_cast<float>(b2);
            k.one_minus_beta2 = static_cast<float>(1 - b2);
            ok::lion_update(s, st[0].data_ptr<float>(), k);
          },
          [&](torch::Tensor& p, torch::Tensor g, std::vector<torch::Tensor>& st, int) {
            p.mul_(1 - lr * wd);
            auto update = st[0].mul(b1).add_(g, 1 - b1).sign_();
            p.add_(update, -lr);
            st[0].mul_(b2).add_(g, 1 - b2);
          });
    }
  });
}

TEST_CASE("optimizer kernels: adagrad matches torch's op-by-op update", "[unit][optim]") {
  for_each_isa([&] {
    for (const Setup& c : setups()) {
      INFO(label(c));
      torch::manual_seed(14);
      const double lr = 0.05, wd = 0.01, lr_decay = 0.1, eps = 1e-10;
      compare(
          c, 1, 0.1,
          [&](const ok::Stream& s, std::vector<torch::Tensor>& st, int step) {
            ok::AdagradCoef k;
            k.clr = static_cast<float>(lr / (1 + (step - 1) * lr_decay));
            k.weight_decay = static_cast<float>(wd);
            k.eps = static_cast<float>(eps);
            ok::adagrad_update(s, st[0].data_ptr<float>(), k);
          },
          [&](torch::Tensor& p, torch::Tensor g, std::vector<torch::Tensor>& st, int step) {
            // torch 1.13 _single_tensor_adagrad
            g = g.add(p, wd);
            const double clr = lr / (1 + (step - 1) * lr_decay);
            st[0].addcmul_(g, g, 1);
            auto std_dev = st[0].sqrt().add_(eps);
            p.addcdiv_(g, std_dev, -clr);
          });
    }
  });
}

TEST_CASE("optimizer kernels: NaN gradients propagate as torch's update does", "[unit][optim]") {
  torch::NoGradGuard no_grad;
  for_each_isa([&] {
    for (auto gt : {ok::ElementType::kF32, ok::ElementType::kBF16, ok::ElementType::kF16}) {
      auto p = torch::ones({19});
      auto g = torch::full({19}, 0.5).to(torch_type(gt));
      g[3] = std::nan("");
      g[18] = std::nan("");  // in the tail
      auto m = torch::zeros({19}), v = torch::zeros({19});
      auto out = torch::zeros({19}, torch::kBFloat16);
      auto s = stream(p, g, &out, gt, ok::ElementType::kBF16, 1.0f);
      ok::AdamCoef k;
      k.step_size = 0.01f;
      ok::adam_update(s, m.data_ptr<float>(), v.data_ptr<float>(), k);
      const auto nan = torch::isnan(p);
      CHECK(nan[3].item<bool>());
      CHECK(nan[18].item<bool>());
      CHECK(nan.sum().item<int64_t>() == 2);
      CHECK(torch::isnan(out).sum().item<int64_t>() == 2);
      CHECK(torch::isnan(m[3]).item<bool>());
    }
  });
}

TEST_CASE("optimizer kernels: multi-threaded updates equal one thread's, element for element", "[unit][optim]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(15);
  const int64_t n = 3 * 16384 + 123;  // several blocks per thread and a tail
  auto p0 = torch::randn({n}), g = torch::randn({n}).to(torch::kBFloat16);
  ok::AdamCoef k;
  k.step_size = 0.01f;
  auto run = [&](int threads) {
    const int saved = at::get_num_threads();
    at::set_num_threads(threads);
    auto p = p0.clone(), m = torch::zeros({n}), v = torch::zeros({n});
    auto out = torch::zeros({n}, torch::kBFloat16);
    auto s = stream(p, g, &out, ok::ElementType::kBF16, ok::ElementType::kBF16, 0.5f);
    ok::adam_update(s, m.data_ptr<float>(), v.data_ptr<float>(), k);
    at::set_num_threads(saved);
    return std::make_pair(p, out);
  };
  const auto one = run(1), two = run(2);
  CHECK(torch::equal(one.first, two.first));
  CHECK(torch::equal(one.second, two.second));
  CHECK_FALSE(torch::equal(one.first, p0));
}
