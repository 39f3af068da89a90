// The memory-efficient optimizers: the 8-bit dynamic codebooks and block-wise quantisation (properties the
// 8-bit optimizers paper states), adamw_8bit against fp32 AdamW, GaLore's projector shapes per proj_type and
// its refresh schedule, exact state round trips (8-bit codes, projections), HF's optim_target_modules
// matching rules, and the layer-wise form stepping inside backward with one gradient alive at a time.
#include <catch2/catch.hpp>

#include "builtins/register_builtins.h"
#include "engine/backward_stepper.h"
#include "optim/adam_moments.h"
#include "optim/blockwise_quant.h"
#include "optim/galore.h"
#include "optim/galore_projector.h"
#include "optim/target_modules.h"
#include "optimizer_test_helpers.h"
#include "util/error.h"

using namespace hftrain;
using Catch::Matchers::Contains;

namespace {

using Params = hftrain_test::NamedParams;

std::unique_ptr<Optimizer> make_memory_optimizer(const std::string& type, const std::string& yaml, std::vector<ParamGroup> groups,
                                OptimizerHyper hyper = {}) {
  return hftrain_test::make_optimizer(type, yaml, std::move(groups), hyper);
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) { return a.sizes() == b.sizes() && torch::equal(a, b); }

}  // namespace

TEST_CASE("dynamic codebooks: 1.0 exact, zero, monotone levels, all values distinct", "[unit][optim][quant]") {
  for (QuantSign sign : {QuantSign::kSigned, QuantSign::kUnsigned}) {
    const auto& book = dynamic_codebook(sign);
    REQUIRE(book.size() == 256);
    CHECK(book[0] == 0.0f);
    std::set<float> distinct(book.begin(), book.end());
    CHECK(distinct.size() == (sign == QuantSign::kSigned ? 255u : 256u));  // signed: 0x80 repeats zero
    CHECK(*distinct.rbegin() == 1.0f);
    CHECK(*distinct.begin() == (sign == QuantSign::kSigned ? -1.0f : 0.0f));
  }
  const auto& u = dynamic_codebook(QuantSign::kUnsigned);
  CHECK(u[1] == static_cast<float>(1e-7));  // E = 7: the smallest magnitude
  CHECK(u[255] == 1.0f);
  const auto& s = dynamic_codebook(QuantSign::kSigned);
  CHECK(s[0x7F] == 1.0f);
  CHECK(s[0xFF] == -1.0f);
  CHECK(s[1] == static_cast<float>(1e-6));  // E = 6, no fraction bits
}

TEST_CASE("block-wise quantisation: absmax per block, exact extremes, bounded error", "[unit][optim][quant]") {
  torch::manual_seed(0);
  const auto x = torch::randn({5000}) * 0.01;
  const auto q = quantize_blockwise(x, QuantSign::kSigned, 2048);
  REQUIRE(q.absmax.numel() == 3);
  CHECK(q.codes.scalar_type() == torch::kUInt8);
  for (int b = 0; b < 3; ++b)
    CHECK(q.absmax[b].item<float>() == x.narrow(0, b * 2048, std::min<int64_t>(2048, 5000 - b * 2048)).abs().max().item<float>());
  const auto back = dequantize_blockwise(q, QuantSign::kSigned, 2048);
  // The block's absmax element comes back exactly; relative error elsewhere is bounded by the code spacing.
  const auto idx = x.abs().argmax().item<int64_t>();
  CHECK(back[idx].item<float>() == x[idx].item<float>());
  const auto rel = ((back - x).abs() / x.abs().max()).max().item<float>();
  CHECK(rel < 0.0075f);  // half the widest step of the top level: 0.9 / 64 / 2
  // Zeros stay zeros; a zero block has absmax 0.
  const auto z = quantize_blockwise(torch::zeros({300}), QuantSign::kUnsigned, 256);
  CHECK(z.absmax.sum().item<float>() == 0.0f);
  CHECK(dequantize_blockwise(z, QuantSign::kUnsigned, 256).abs().sum().item<float>() == 0.0f);
}

TEST_CASE("adamw_8bit: fp32 moments below min_8bit_size equal adamw, 8-bit stays close", "[unit][optim][quant]") {
  Params a, b, c;
  auto fp32 = make_memory_optimizer("adamw", "{}", a.groups());
  auto small = make_memory_optimizer("adamw_8bit", "{min_8bit_size: 100000}", b.groups());  // nothing quantised
  auto q8 = make_memory_optimizer("adamw_8bit", "{min_8bit_size: 0, block_size: 64}", c.groups());
  for (int k = 0; k < 20; ++k) {
    a.set_grads(k), b.set_grads(k), c.set_grads(k);
    fp32->step(1e-2), small->step(1e-2), q8->step(1e-2);
  }
  CHECK(torch::allclose(a.w, b.w, 1e-5, 1e-6));  // adamw runs its fused kernel: rounding order differs
  const double drift = (a.w - c.w).abs().max().item<double>();
  CHECK(drift > 0);
  CHECK(drift < 2e-2);  // 20 steps of lr 1e-2: the 8-bit moments move the weights by under 10 % of the total path
  const auto state = q8->state();
  CHECK(state.at("w.exp_avg_q8").scalar_type() == torch::kUInt8);
  CHECK(state.at("w.exp_avg_absmax").numel() == 4);  // 240 elements in blocks of 64
  CHECK(state.count("w.exp_avg") == 0);
}

TEST_CASE("adamw_8bit and galore: state round trip continues bitwise", "[unit][optim][quant]") {
  struct Case {
    std::string type, yaml;
  };
  const std::vector<Case> cases = {
      {"adamw_8bit", "{min_8bit_size: 0, block_size: 64}"},
      {"galore_adamw", "{rank: 3, update_proj_gap: 4, proj_type: full}"},
      {"galore_adamw_8bit", "{rank: 3, update_proj_gap: 4, min_8bit_size: 0, block_size: 16}"},
      {"galore_adafactor", "{rank: 3, update_proj_gap: 4, proj_type: left, beta1: 0.9}"},
  };
  for (const auto& c : cases) {
    INFO(c.type);
    OptimizerHyper hyper;
    hyper.low_rank_params = {"w"};
    Params a, b;
    auto first = make_memory_optimizer(c.type, c.yaml, a.groups(), hyper);
    for (int k = 0; k < 6; ++k) a.set_grads(k), first->step(1e-2);
    // b restarts from a's weights and state (a fresh optimizer), then both take steps 7..10 (a refresh at 9).
    {
      torch::NoGradGuard g;
      b.w.copy_(a.w);
      b.v.copy_(a.v);
    }
    auto second = make_memory_optimizer(c.type, c.yaml, b.groups(), hyper);
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [k, v] : first->state()) saved[k] = v.clone();
    second->load_state(saved);
    for (int k = 6; k < 10; ++k) {
      a.set_grads(k), b.set_grads(k);
      first->step(1e-2), second->step(1e-2);
    }
    CHECK(same_bits(a.w, b.w));
    CHECK(same_bits(a.v, b.v));
    for (const auto& [k, v] : first->state()) CHECK(same_bits(v, second->state().at(k)));
  }
}

TEST_CASE("galore projector: low-rank shapes per proj_type and refresh every update_proj_gap steps", "[unit][optim][galore]") {
  struct Expect {
    std::string type;
    std::vector<int64_t> tall, wide;  // for 12x5 and 5x12 with rank 3
  };
  for (const auto& e : std::vector<Expect>{{"std", {12, 3}, {3, 12}},
                                           {"reverse_std", {3, 5}, {5, 3}},
                                           {"left", {3, 5}, {3, 12}},
                                           {"right", {12, 3}, {5, 3}},
                                           {"full", {3, 3}, {3, 3}}}) {
    INFO(e.type);
    GaloreSettings s{3, 2, 0.5, e.type};
    GaloreProjector tall({12, 5}, s), wide({5, 12}, s);
    torch::manual_seed(1);
    const auto g = torch::randn({12, 5});
    CHECK(tall.project(g).sizes().vec() == e.tall);
    CHECK(tall.low_rank_shape() == e.tall);
    CHECK(wide.project(g.t().contiguous()).sizes().vec() == e.wide);
    // Projecting back gives the full shape, scaled.
    CHECK(tall.project_back(tall.project(g)).sizes().vec() == std::vector<int64_t>{12, 5});
  }
  // With the gradient itself rank 1, the projection captures it exactly: back(proj(G)) = scale * G.
  GaloreSettings s{1, 3, 0.5, "left"};
  GaloreProjector p({6, 4}, s);
  const auto g = torch::outer(torch::arange(1, 7).to(torch::kFloat), torch::tensor({1.f, -2.f, 0.5f, 3.f}));
  CHECK(torch::allclose(p.project_back(p.project(g)), g * 0.5, 1e-4, 1e-5));
  // Steps 2 and 3 keep the first projection; step 4 (1 + gap) recomputes it from its gradient.
  const auto other = torch::outer(torch::tensor({1.f, 0.f, 0.f, 0.f, 0.f, 1.f}), torch::tensor({0.f, 1.f, 0.f, 0.f}));
  p.project(other), p.project(other);
  std::map<std::string, torch::Tensor> before, after;
  p.save("x", before);
  p.project(other);
  p.save("x", after);
  CHECK_FALSE(torch::allclose(before.at("x.galore_left"), after.at("x.galore_left")));
  CHECK(after.at("x.galore_step").item<int64_t>() == 4);
}

TEST_CASE("galore: refuses a run without targets and a non-matrix target", "[unit][optim][galore]") {
  Params a;
  CHECK_THROWS_WITH(make_memory_optimizer("galore_adamw", "{}", a.groups()), Contains("training.optim_target_modules"));
  OptimizerHyper hyper;
  hyper.low_rank_params = {"v"};
  CHECK_THROWS_WITH(make_memory_optimizer("galore_adamw", "{}", a.groups(), hyper), Contains("'v' is not a 2-D weight"));
  // A checkpoint of another proj_type does not load as this one.
  hyper.low_rank_params = {"w"};
  auto left = make_memory_optimizer("galore_adamw", "{rank: 2, proj_type: left}", a.groups(), hyper);
  a.set_grads(0);
  left->step(1e-3);
  auto right = make_memory_optimizer("galore_adamw", "{rank: 2, proj_type: right}", Params().groups(), hyper);
  CHECK_THROWS_WITH(right->load_state(left->state()), Contains("proj_type"));
}

TEST_CASE("optim_target_modules follows HF's matching rules", "[unit][optim][galore]") {
  const std::vector<ModuleEntry> modules = {
      {"", false},
      {"transformer", false},
      {"transformer.wte", false},
      {"transformer.h.0.attn", false},
      {"transformer.h.0.attn.c_attn", true},
      {"transformer.h.0.attn.c_proj", true},
      {"transformer.h.0.mlp", false},
      {"transformer.h.0.mlp.c_fc", true},
      {"transformer.h.0.mlp.c_proj", true},
      {"transformer.h.1.attn.c_attn", true},
  };
  auto resolve = [&](bool single, std::vector<std::string> patterns) {
    return resolve_target_modules(TargetModules{single, std::move(patterns)}, modules);
  };
  // List: substring ("attn" is in every attention module name) -> the Linear ones only.
  CHECK(resolve(false, {"attn"}) == std::set<std::string>{"transformer.h.0.attn.c_attn.weight",
                                                         "transformer.h.0.attn.c_proj.weight",
                                                         "transformer.h.1.attn.c_attn.weight"});
  // List: exact name, and a regular expression matched at the start (re.match).
  CHECK(resolve(false, {"transformer.h.0.mlp.c_fc"}) == std::set<std::string>{"transformer.h.0.mlp.c_fc.weight"});
  CHECK(resolve(false, {R"(transformer\.h\.1\..*)"}) == std::set<std::string>{"transformer.h.1.attn.c_attn.weight"});
  // One string: the whole name must match (re.fullmatch): "c_attn" alone matches nothing.
  CHECK(resolve(true, {R"(.*\.c_attn)"}) == std::set<std::string>{"transformer.h.0.attn.c_attn.weight",
                                                                   "transformer.h.1.attn.c_attn.weight"});
  CHECK_THROWS_WITH(resolve(true, {"c_attn"}), Contains("'c_attn' selects no Linear module"));
  // A pattern matching only non-Linear modules, or nothing, is an error naming it (HF only warns).
  CHECK_THROWS_WITH(resolve(false, {"attn", "wte"}), Contains("'wte'") && Contains("transformer.wte"));
  CHECK_THROWS_WITH(resolve(false, {"lm_head"}), Contains("'lm_head'") && Contains("matches no module"));
  CHECK_THROWS_WITH(resolve(false, {"("}), Contains("not a valid regular expression"));
}

TEST_CASE("layer-wise galore steps inside backward like the plain step, one gradient alive at a time",
          "[unit][optim][galore]") {
  OptimizerHyper hyper;
  hyper.low_rank_params = {"w"};
  Params a, b;
  auto plain = make_memory_optimizer("galore_adamw", "{rank: 3, update_proj_gap: 2}", a.groups(), hyper);
  auto layerwise = make_memory_optimizer("galore_adamw_layerwise", "{rank: 3, update_proj_gap: 2}", b.groups(), hyper);
  REQUIRE(layerwise->steps_in_backward());
  BackwardStepper stepper(*layerwise);
  torch::manual_seed(9);
  const auto x = torch::randn({7, 24});
  for (int k = 0; k < 4; ++k) {
    const double lr = 1e-2 * (k + 1);
    auto loss_a = (torch::tanh(x.matmul(a.w)) * a.v).sum();
    loss_a.backward();
    const double norm = std::sqrt(a.w.grad().pow(2).sum().item<double>() + a.v.grad().pow(2).sum().item<double>());
    plain->step(lr);
    a.w.mutable_grad() = torch::Tensor();
    a.v.mutable_grad() = torch::Tensor();
    stepper.begin(lr);
    auto loss_b = (torch::tanh(x.matmul(b.w)) * b.v).sum();
    loss_b.backward();
    const DeviceScalar got = stepper.finish();
    CHECK(got.pending());  // summed on the device, read only when asked
    CHECK(got.value() == Approx(norm).epsilon(1e-6));
    CHECK_FALSE(b.w.grad().defined());
    CHECK_FALSE(b.v.grad().defined());
    CHECK(same_bits(a.w, b.w));
    CHECK(same_bits(a.v, b.v));
  }
  CHECK(stepper.peak_grad_bytes() == 24 * 10 * 4);  // the largest gradient alone
  CHECK(stepper.all_grad_bytes() == (24 * 10 + 10) * 4);
}

TEST_CASE("8-bit moments of a large tensor update in runs of blocks, bitwise as in one piece", "[unit][optim][quant]") {
  torch::manual_seed(4);
  const std::vector<int64_t> shape{1100, 1000};  // 1.1M elements: two runs of 512 blocks of 2048
  torch::Tensor a = torch::randn(shape), b = a.clone();
  AdamMomentsConfig config;
  config.quantized = true;
  AdamMoments whole(shape, config), runs(shape, config);
  for (int k = 0; k < 3; ++k) {
    const torch::Tensor g = torch::randn(shape) * 0.1;
    const AdamMoments::Work w = whole.update(g, 1e-3);
    a.addcdiv_(w.exp_avg, w.denom, -w.step_size);
    runs.update_param(b, g, 1e-3);
  }
  CHECK(torch::equal(a, b));
  std::map<std::string, torch::Tensor> sa, sb;
  whole.save("x", sa);
  runs.save("x", sb);
  for (const auto& [k, v] : sa) CHECK(torch::equal(v, sb.at(k)));
}
