// Optimizers against updates worked out from their published rules (torch.optim's documented
// algorithms for Adam / AdamW / SGD, the Lion paper, the Adafactor paper with HF's conventions), in
// float64 on tiny tensors; state() / load_state() round trips; option validation.
#include <catch2/catch.hpp>

#include <cmath>

#include "builtins/register_builtins.h"
#include "optim/optimizer.h"
#include "util/error.h"

using namespace hftrain;
using Catch::Matchers::Contains;

namespace {

torch::Tensor param(std::vector<double> values, std::vector<int64_t> shape = {}) {
  auto t = torch::tensor(values, torch::kDouble);
  if (!shape.empty()) t = t.reshape(shape);
  return t.set_requires_grad(true);
}

void set_grad(torch::Tensor& p, std::vector<double> values) {
  p.mutable_grad() = torch::tensor(values, torch::kDouble).reshape(p.sizes());
}

// One decay group holding `params` (named p0, p1, ...) with weight decay `wd`.
std::vector<ParamGroup> group(std::vector<torch::Tensor> params, double wd) {
  ParamGroup g;
  for (std::size_t i = 0; i < params.size(); ++i) {
    g.names.push_back("p" + std::to_string(i));
    g.params.push_back(params[i]);
  }
  g.weight_decay = wd;
  return {g};
}

std::unique_ptr<Optimizer> make(const std::string& type, const std::string& yaml, std::vector<ParamGroup> groups,
                                OptimizerHyper hyper = {}) {
  const auto& c = builtin_components();
  Issues issues("test.yaml");
  auto options = c.optimizers.parse(type, YAML::Load(yaml), "optimizer", issues, {"type"});
  issues.throw_if_any();
  return c.optimizers.build(type, options, std::move(groups), hyper);
}

double elem(const torch::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<double>(); }

}  // namespace

TEST_CASE("every optimizer is registered", "[unit][optim]") {
  const auto& c = builtin_components();
  for (const char* name : {"adamw", "adam", "sgd", "adafactor", "lion", "adagrad"}) CHECK(c.optimizers.contains(name));
}

TEST_CASE("adamw: decoupled decay, bias-corrected moments", "[unit][optim]") {
  auto p = param({1.0, -2.0});
  auto opt = make("adamw", "{}", group({p}, 0.1), OptimizerHyper{0.9, 0.999, 1e-8});
  const double lr = 0.1;
  double x = 1.0, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    const double g = 0.5 * t;  // gradient of element 0
    set_grad(p, {g, 0.0});
    opt->step(lr);
    x *= 1 - lr * 0.1;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    x -= lr * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-12));
  }
  CHECK(elem(p, 1) == Approx(-2.0 * std::pow(1 - 0.01, 3)).epsilon(1e-12));  // zero gradient: decay only
}

TEST_CASE("adam: weight decay is added to the gradient (L2)", "[unit][optim]") {
  auto p = param({1.0});
  auto opt = make("adam", "{}", group({p}, 0.1), OptimizerHyper{0.8, 0.99, 1e-6});
  const double lr = 0.05;
  double x = 1.0, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    set_grad(p, {0.3});
    opt->step(lr);
    const double g = 0.3 + 0.1 * x;
    m = 0.8 * m + 0.2 * g;
    v = 0.99 * v + 0.01 * g * g;
    x -= lr * (m / (1 - std::pow(0.8, t))) / (std::sqrt(v / (1 - std::pow(0.99, t))) + 1e-6);
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-12));
  }
}

TEST_CASE("sgd: plain, momentum with dampening, nesterov, L2 weight decay", "[unit][optim]") {
  const std::vector<double> grads = {1.0, -0.5, 2.0};
  SECTION("plain") {
    auto p = param({1.0});
    auto opt = make("sgd", "{}", group({p}, 0.1));
    double x = 1.0;
    for (double g : grads) {
      set_grad(p, {g});
      opt->step(0.1);
      x -= 0.1 * (g + 0.1 * x);
    }
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-14));
    CHECK(opt->state().empty());  // no momentum buffer without momentum
  }
  SECTION("momentum 0.9, dampening 0.5: the first buffer is the gradient itself") {
    auto p = param({1.0});
    auto opt = make("sgd", "{momentum: 0.9, dampening: 0.5}", group({p}, 0.0));
    double x = 1.0, buf = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      set_grad(p, {grads[i]});
      opt->step(0.1);
      buf = i == 0 ? grads[i] : 0.9 * buf + 0.5 * grads[i];
      x -= 0.1 * buf;
    }
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-14));
  }
  SECTION("nesterov") {
    auto p = param({1.0});
    auto opt = make("sgd", "{momentum: 0.9, nesterov: true}", group({p}, 0.1));
    double x = 1.0, buf = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      set_grad(p, {grads[i]});
      opt->step(0.1);
      const double d = grads[i] + 0.1 * x;
      buf = i == 0 ? d : 0.9 * buf + d;
      x -= 0.1 * (d + 0.9 * buf);
    }
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-14));
  }
}

TEST_CASE("lion: sign of the interpolated momentum, decoupled decay, betas from training unless set", "[unit][optim]") {
  auto p = param({1.0, 2.0, 3.0});
  auto opt = make("lion", "{}", group({p}, 0.5), OptimizerHyper{0.9, 0.99, 1e-8});
  set_grad(p, {0.2, -0.1, 0.0});
  opt->step(0.01);  // m = 0: c = 0.1 g
  CHECK(elem(p, 0) == Approx(1.0 * (1 - 0.005) - 0.01));
  CHECK(elem(p, 1) == Approx(2.0 * (1 - 0.005) + 0.01));
  CHECK(elem(p, 2) == Approx(3.0 * (1 - 0.005)));  // sign(0) = 0
  // m = 0.01 * g = (0.002, -0.001, 0). A gradient against the momentum: c = beta1 m + (1 - beta1) g
  // = 0.0018 - 0.005 < 0 decides (beta2's weights would give 0.00198 - 0.0005 > 0).
  set_grad(p, {-0.05, 0.0, 0.0});
  const double x0 = elem(p, 0);
  opt->step(0.01);
  CHECK(elem(p, 0) == Approx(x0 * (1 - 0.005) + 0.01));
  CHECK(opt->state().at("p0.exp_avg")[0].item<double>() == Approx(0.99 * 0.002 + 0.01 * -0.05));

  auto q = param({1.0});
  auto own = make("lion", "{beta1: 0.5, beta2: 0.0}", group({q}, 0.0), OptimizerHyper{0.9, 0.99, 1e-8});
  set_grad(q, {1.0});
  own->step(0.1);  // m = (1 - beta2) g = 1
  set_grad(q, {-0.8});
  own->step(0.1);  // c = 0.5 * 1 + 0.5 * -0.8 > 0: moves down again (with beta2's weights c = g < 0)
  CHECK(elem(q, 0) == Approx(1.0 - 0.1 - 0.1));
}

TEST_CASE("adafactor: factored second moment for matrices, full for vectors", "[unit][optim]") {
  // HF Trainer defaults: lr from the schedule, no parameter scaling, no relative step, no beta1.
  const double lr = 0.1, eps1 = 1e-30;
  auto w = param({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  auto b = param({0.5, -0.5});
  auto opt = make("adafactor", "{}", group({w, b}, 0.0));
  const std::vector<double> g = {0.1, -0.2, 0.3, 0.4, 0.5, -0.6};
  set_grad(w, g);
  set_grad(b, {0.3, -0.03});
  opt->step(lr);
  // t = 1: beta2_t = 1 - 1^-0.8 = 0, so R = row means of g^2, C = column means, V = R C / mean(R).
  double R[2] = {0, 0}, C[3] = {0, 0, 0};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      R[i] += (g[i * 3 + j] * g[i * 3 + j] + eps1) / 3;
      C[j] += (g[i * 3 + j] * g[i * 3 + j] + eps1) / 2;
    }
  const double meanR = (R[0] + R[1]) / 2;
  double U[6], ss = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      U[i * 3 + j] = g[i * 3 + j] / std::sqrt(R[i] * C[j] / meanR);
      ss += U[i * 3 + j] * U[i * 3 + j];
    }
  const double clip = std::max(1.0, std::sqrt(ss / 6) / 1.0);
  for (int k = 0; k < 6; ++k) CHECK(elem(w, k) == Approx((k + 1) - lr * U[k] / clip).epsilon(1e-12));
  // Vector: V = g^2 + eps1, so U = sign(g) with RMS 1: no clipping.
  CHECK(elem(b, 0) == Approx(0.5 - lr).epsilon(1e-12));
  CHECK(elem(b, 1) == Approx(-0.5 + lr).epsilon(1e-12));
  auto st = opt->state();
  CHECK(st.at("p0.exp_avg_sq_row").sizes() == torch::IntArrayRef({2}));
  CHECK(st.at("p0.exp_avg_sq_col").sizes() == torch::IntArrayRef({3}));
  CHECK(st.at("p1.exp_avg_sq").sizes() == torch::IntArrayRef({2}));
  CHECK(st.count("p0.exp_avg") == 0);

  // t = 2 on the vector: beta2_t = 1 - 2^-0.8.
  set_grad(b, {0.1, 0.2});
  const double before0 = elem(b, 0), before1 = elem(b, 1);
  opt->step(lr);
  const double b2 = 1 - std::pow(2.0, -0.8);
  const double v0 = b2 * (0.09 + eps1) + (1 - b2) * (0.01 + eps1), v1 = b2 * (0.0009 + eps1) + (1 - b2) * (0.04 + eps1);
  const double u0 = 0.1 / std::sqrt(v0), u1 = 0.2 / std::sqrt(v1);
  const double c2 = std::max(1.0, std::sqrt((u0 * u0 + u1 * u1) / 2));
  CHECK(elem(b, 0) == Approx(before0 - lr * u0 / c2).epsilon(1e-12));
  CHECK(elem(b, 1) == Approx(before1 - lr * u1 / c2).epsilon(1e-12));
}

TEST_CASE("adafactor options: relative step, parameter scale, first moment, weight decay, clipping", "[unit][optim]") {
  auto b = param({3.0, -4.0});  // RMS = sqrt(12.5)
  auto opt = make("adafactor", "{relative_step: true, scale_parameter: true, beta1: 0.5, clip_threshold: 0.5}",
                  group({b}, 0.2));
  set_grad(b, {0.3, 0.4});
  opt->step(123.0);  // the learning rate passed in is ignored with relative_step
  // U = sign(g) = (1, 1), RMS 1 > clip 0.5: halved. Step size = min(1e-2, 1/sqrt(1)) * RMS(param).
  const double alpha = 1e-2 * std::sqrt(12.5);
  const double m0 = 0.5 * alpha * 0.5;  // first moment of the scaled update: (1 - beta1) * alpha * U
  CHECK(elem(b, 0) == Approx(3.0 * (1 - 0.2 * alpha) - m0).epsilon(1e-6));
  CHECK(elem(b, 1) == Approx(-4.0 * (1 - 0.2 * alpha) - m0).epsilon(1e-6));
  CHECK(opt->state().at("p0.exp_avg")[0].item<double>() == Approx(m0).epsilon(1e-6));

  auto c = param({1.0});
  auto warm = make("adafactor", "{relative_step: true, warmup_init: true}", group({c}, 0.0));
  set_grad(c, {2.0});
  warm->step(1.0);  // relative step min(1e-6 * 1, 1) = 1e-6
  CHECK(elem(c, 0) == Approx(1.0 - 1e-6).epsilon(1e-14));

  auto tiny = param({1e-5});  // RMS below eps2: the scale is eps2
  auto scaled = make("adafactor", "{scale_parameter: true}", group({tiny}, 0.0));
  set_grad(tiny, {1.0});
  scaled->step(0.1);
  CHECK(elem(tiny, 0) == Approx(1e-5 - 0.1 * 1e-3).epsilon(1e-12));
}

TEST_CASE("optimizer state round-trips through state() / load_state()", "[unit][optim]") {
  struct Case {
    const char* type;
    const char* options;
  };
  for (const Case& k : {Case{"adamw", "{}"}, Case{"adam", "{}"}, Case{"sgd", "{momentum: 0.9}"},
                        Case{"adafactor", "{beta1: 0.9}"}, Case{"lion", "{}"},
                        Case{"adagrad", "{lr_decay: 0.1, initial_accumulator_value: 0.1}"}}) {
    INFO(k.type);
    auto make_params = [] { return std::vector<torch::Tensor>{param({1.0, 2.0, 3.0, 4.0}, {2, 2}), param({0.5, -1.0})}; };
    auto a = make_params(), b = make_params();
    auto opt_a = make(k.type, k.options, group(a, 0.1));
    auto grads = [](std::vector<torch::Tensor>& ps, double s) {
      set_grad(ps[0], {0.1 * s, -0.2, 0.3, 0.05 * s});
      set_grad(ps[1], {0.2, -0.1 * s});
    };
    for (int t = 1; t <= 2; ++t) {
      grads(a, t);
      opt_a->step(0.01);
    }
    {
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 2; ++i) b[i].copy_(a[i]);
    }
    // Through a copy of the tensors, as a checkpoint would give them back.
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [name, t] : opt_a->state()) saved[name] = t.clone();
    auto opt_b = make(k.type, k.options, group(b, 0.1));
    opt_b->load_state(saved);
    for (int t = 3; t <= 4; ++t) {
      grads(a, t);
      grads(b, t);
      opt_a->step(0.01);
      opt_b->step(0.01);
    }
    for (int i = 0; i < 2; ++i) CHECK(torch::equal(a[i], b[i]));
    // A fresh optimizer without the state takes a different step.
    auto c = make_params();
    {
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 2; ++i) c[i].copy_(b[i]);
    }
    auto opt_c = make(k.type, k.options, group(c, 0.1));
    grads(b, -0.05);  // small and against the history, so that even Lion's sign differs without momentum
    grads(c, -0.05);
    opt_b->step(0.01);
    opt_c->step(0.01);
    CHECK_FALSE(torch::equal(b[0], c[0]));
  }
}

TEST_CASE("load_state rejects state of the wrong shape, naming the tensor", "[unit][optim]") {
  auto p = param({1.0, 2.0});
  for (const char* type : {"adamw", "lion"}) {
    auto opt = make(type, "{}", group({p}, 0.0));
    std::map<std::string, torch::Tensor> bad = {{"p0.exp_avg", torch::zeros({3}, torch::kDouble)},
                                                {"p0.exp_avg_sq", torch::zeros({3}, torch::kDouble)},
                                                {"p0.step", torch::tensor(int64_t{1})}};
    CHECK_THROWS_AS(opt->load_state(bad), RuntimeFailure);
    CHECK_THROWS_WITH(opt->load_state(bad), Contains("p0.exp_avg"));
  }
  auto opt = make("adafactor", "{beta1: 0.9}", group({p}, 0.0));
  CHECK_THROWS_WITH(opt->load_state({{"p0.step", torch::tensor(int64_t{1})},
                                     {"p0.exp_avg_sq", torch::zeros({2}, torch::kDouble)}}),
                    Contains("p0") && Contains("exp_avg"));
}

TEST_CASE("optimizer options are validated with the key named", "[unit][optim]") {
  auto p = param({1.0});
  CHECK_THROWS_WITH(make("sgd", "{nesterov: true}", group({p}, 0.0)), Contains("optimizer.nesterov"));
  CHECK_THROWS_WITH(make("sgd", "{nesterov: true, momentum: 0.9, dampening: 0.1}", group({p}, 0.0)),
                    Contains("optimizer.nesterov"));
  CHECK_THROWS_AS(make("adafactor", "{warmup_init: true}", group({p}, 0.0)), ConfigError);
  CHECK_THROWS_WITH(make("adafactor", "{warmup_init: true}", group({p}, 0.0)), Contains("optimizer.warmup_init"));
  CHECK_THROWS_WITH(make("lion", "{beta2: 1.5}", group({p}, 0.0)), Contains("optimizer.beta2"));
  CHECK_THROWS_WITH(make("adafactor", "{beta1: -0.1}", group({p}, 0.0)), Contains("optimizer.beta1"));
  CHECK_THROWS_WITH(make("sgd", "{momentum: -1}", group({p}, 0.0)), Contains("optimizer.momentum"));
  CHECK_THROWS_WITH(make("adamw", "{betas: [0.9, 0.99]}", group({p}, 0.0)), Contains("optimizer.betas"));
}

TEST_CASE("adagrad: torch.optim.Adagrad's rule with lr_decay, initial accumulator and L2 decay", "[unit][optim]") {
  auto p = param({1.0, -2.0});
  auto opt = make("adagrad", "{lr_decay: 0.5, initial_accumulator_value: 0.2, eps: 1e-6}", group({p}, 0.1));
  const double lr = 0.1;
  double x = 1.0, sum = 0.2;
  for (int t = 1; t <= 3; ++t) {
    const double g = 0.3 * t, grad = g + 0.1 * x;  // weight decay added to the gradient
    set_grad(p, {g, 0.0});
    opt->step(lr);
    sum += grad * grad;
    x -= lr / (1 + (t - 1) * 0.5) * grad / (std::sqrt(sum) + 1e-6);
    CHECK(elem(p, 0) == Approx(x).epsilon(1e-12));
  }
  CHECK(opt->state().count("p0.sum") == 1);
}

TEST_CASE("adam, adamw, sgd, lion, adagrad: the kernel pass agrees with the op-by-op path and with float64", "[unit][optim]") {
  // A contiguous fp32 parameter takes the kernel pass; the same values held in a transposed (non-contiguous)
  // view take torch's op-by-op path; a float64 copy gives the exact update. 20 steps.
  struct Case {
    const char* type;
    const char* options;
  };
  for (const Case& k : {Case{"adamw", "{}"}, Case{"adam", "{}"}, Case{"sgd", "{momentum: 0.9, dampening: 0.1}"},
                        Case{"sgd", "{momentum: 0.9, nesterov: true}"}, Case{"lion", "{}"},
                        Case{"adagrad", "{lr_decay: 0.01}"}}) {
    const char* type = k.type;
    INFO(type << " " << k.options);
    torch::manual_seed(7);
    auto init = torch::randn({37, 53});
    auto fused = init.clone().set_requires_grad(true);
    auto strided = init.t().contiguous().t().set_requires_grad(true);  // same values, transposed strides
    auto exact = init.to(torch::kDouble).set_requires_grad(true);
    REQUIRE(fused.is_contiguous());
    REQUIRE_FALSE(strided.is_contiguous());
    const OptimizerHyper hyper{0.9, 0.99, 1e-8};
    auto opt_fused = make(type, k.options, group({fused}, 0.1), hyper);
    auto opt_strided = make(type, k.options, group({strided}, 0.1), hyper);
    auto opt_exact = make(type, k.options, group({exact}, 0.1), hyper);
    for (int step = 0; step < 20; ++step) {
      auto g = torch::randn({37, 53}) * 0.1;
      fused.mutable_grad() = g.clone();
      strided.mutable_grad() = g.t().contiguous().t();
      exact.mutable_grad() = g.to(torch::kDouble);
      opt_fused->step(1e-2);
      opt_strided->step(1e-2);
      opt_exact->step(1e-2);
    }
    const double vs_ops = (fused - strided).abs().max().item<double>();
    const double vs_exact = (fused.to(torch::kDouble) - exact).abs().max().item<double>();
    const double ops_vs_exact = (strided.to(torch::kDouble) - exact).abs().max().item<double>();
    CHECK(vs_ops < 1e-6);
    CHECK(vs_exact < 1e-5);  // float rounding of |p| ~ 3 over 20 steps
    CHECK(vs_exact <= 2 * ops_vs_exact + 1e-7);  // no less accurate than torch's own sequence of ops
    CHECK((fused - init).abs().max().item<double>() > 1e-3);  // it did move
  }
}

TEST_CASE("optimizers read 16-bit gradients, fold the gradient scale and write the 16-bit parameters", "[unit][optim]") {
  // The mixed-precision contract (ParamGroup::grads16 / params16, StepScaling): against the same optimizer
  // stepping an fp32 copy with the fp32 gradient g16 * scale, for the kernel pass (contiguous) and the
  // op-by-op pass (non-contiguous master); the 16-bit parameter is torch's rounding of the fp32 result.
  for (const char* type : {"adamw", "adam", "sgd", "lion", "adagrad"}) {
    for (auto half : {torch::kBFloat16, torch::kHalf}) {
      for (bool contiguous : {true, false}) {
        INFO(type << (half == torch::kHalf ? " fp16" : " bf16") << (contiguous ? " kernel" : " op-by-op"));
        torch::NoGradGuard no_grad;
        torch::manual_seed(3);
        auto init = torch::randn({9, 7});
        auto master = contiguous ? init.clone() : init.t().contiguous().t();
        auto reference = init.clone();
        auto p16 = torch::zeros({9, 7}, half), g16 = torch::zeros({9, 7}, half);
        ParamGroup g;
        g.names = {"p0"};
        g.params = {master};
        g.weight_decay = 0.1;
        g.grads16 = {g16};
        g.params16 = {p16};
        auto opt = make(type, type == std::string("sgd") ? "{momentum: 0.9}" : "{}", {g});
        REQUIRE(opt->fuses_low_precision());
        auto opt_ref = make(type, type == std::string("sgd") ? "{momentum: 0.9}" : "{}", group({reference}, 0.1));
        for (int step = 0; step < 3; ++step) {
          g16.copy_(torch::randn({9, 7}) * 100);
          reference.mutable_grad() = g16.to(torch::kFloat) * 0.25f;
          opt->step(1e-2, StepScaling{0.25});
          opt_ref->step(1e-2);
        }
        // Float rounding only (fused multiply-adds against torch's separate ops): a few ulp of the values.
        const double scale = 1 + reference.abs().max().item<double>();
        CHECK((master - reference).abs().max().item<double>() < 1e-6 * scale);
        CHECK(torch::equal(p16, master.to(half)));
        CHECK((master - init).abs().max().item<double>() > 1e-3);
      }
    }
  }
}
