// The data-parallel engine in bf16 mixed precision: 16-bit parameters and gradients with fp32 master
// weights, across real worker processes on loopback (hidden "[.mp_worker]" cases launched by the test
// cases at the bottom) and in one process:
//  - ZeRO stages 0, 1 and 2 on 2 ranks give bitwise the same masters (same reduction and update
//    arithmetic; no clipping, one micro-step), and agree with one process over the whole batch within
//    a tolerance that bf16 gradient rounding explains;
//  - per-rank bytes of parameters, gradients, masters and optimizer state equal the ZeRO paper's
//    formula (2 + 2 + 12 bytes per parameter, the sharded parts / N) computed here independently;
//  - a gradient overflow skips the update (one verdict for all ranks), and an overflowed step leaves
//    the weights bitwise equal to a run that never saw that batch, with the dynamic loss scale halved;
//  - bf16 gradients travel through the Gloo collectives (which lack bfloat16) exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "distributed/comm.h"
#include "distributed/env.h"
#include "distributed/launcher.h"
#include "dist_workers.h"
#include "engine/zero_engine.h"
#include "engine/precision.h"
#include "optim/adamw.h"
#include "optimizer_test_helpers.h"

using hftrain_test::adamw;

using namespace hftrain;

namespace {

// Two layers with sizes that do not divide evenly (padding) and biases (two optimizer groups).
struct PrecisionNet {
  torch::Tensor w1, b1, w2, b2;
  PrecisionNet() {
    torch::manual_seed(7);
    w1 = (torch::randn({9, 5}) * 0.5).requires_grad_();
    b1 = (torch::randn({9}) * 0.1).requires_grad_();
    w2 = (torch::randn({3, 9}) * 0.5).requires_grad_();
    b2 = torch::zeros({3}).requires_grad_();
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    AutocastScope autocast(w1.scalar_type());
    auto h = torch::tanh(torch::addmm(b1, x, w1.t()));
    return torch::mse_loss(torch::addmm(b2, h, w2.t()).to(torch::kFloat), y);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named() {
    return {{"l1.weight", w1}, {"l1.bias", b1}, {"l2.weight", w2}, {"l2.bias", b2}};
  }
  std::vector<std::string> order() { return {"l1.weight", "l1.bias", "l2.weight", "l2.bias"}; }
};

EngineSettings bf16_options(int stage, double max_grad_norm = 0) {
  EngineSettings o;
  o.stage = stage;
  o.max_grad_norm = max_grad_norm;
  o.bucket_cap_mb = 40.0 / (1024 * 1024);  // 20 bf16 elements: several buckets
  o.report_memory = false;
  o.precision.param_dtype = torch::kBFloat16;
  o.precision.reduce_dtype = torch::kBFloat16;
  return o;
}

int64_t padded(int64_t numel, int n) { return (numel + 2 * n - 1) / (2 * n) * (2 * n); }

}  // namespace

// ---- workers --------------------------------------------------------------------------------------

TEST_CASE("mp worker: bf16 stages agree and hold the ZeRO formula's bytes", "[.mp_worker]") {
  auto comm = hftrain_test::worker_comm();
  const int rank = comm->rank(), n = comm->world_size();
  torch::manual_seed(11);
  auto x = torch::randn({3, 12, 5}), y = torch::randn({3, 12, 3});
  auto rows = torch::arange(rank, 12, n);

  LocalComm local;
  PrecisionNet ref_net;
  ZeroEngine ref(make_param_groups(ref_net.named(), 0.1), ref_net.order(), adamw, bf16_options(0), local);
  std::vector<std::unique_ptr<PrecisionNet>> nets;
  std::vector<std::unique_ptr<ZeroEngine>> engines;
  for (int stage : {0, 1, 2}) {
    nets.push_back(std::make_unique<PrecisionNet>());
    engines.push_back(std::make_unique<ZeroEngine>(make_param_groups(nets.back()->named(), 0.1),
                                                           nets.back()->order(), adamw, bf16_options(stage), *comm));
  }
  REQUIRE(nets[0]->w1.scalar_type() == torch::kBFloat16);
  REQUIRE(nets[0]->w1.grad().scalar_type() == torch::kBFloat16);
  for (int k = 0; k < 3; ++k) {
    ref.backward(ref_net.loss(x[k], y[k]), true);
    ref.step(1e-2);
    for (std::size_t e = 0; e < engines.size(); ++e) {
      engines[e]->backward(nets[e]->loss(x[k].index_select(0, rows), y[k].index_select(0, rows)), true);
      CHECK_FALSE(engines[e]->step(1e-2).skipped);
    }
  }
  const auto want = ref.master_weights();
  const auto s0 = engines[0]->master_weights();
  for (std::size_t e = 1; e < engines.size(); ++e) {
    const auto got = engines[e]->master_weights();
    for (const auto& [name, t] : s0) {
      INFO("stage " << e << " vs stage 0: " << name);
      CHECK(torch::equal(got.at(name), t));
    }
  }
  for (const auto& [name, t] : s0) {
    INFO(name << " vs one process: max diff " << (t - want.at(name)).abs().max().item<double>());
    // The ranks round partial gradients to bf16 before summing (relative error 2^-8 each), the reference
    // rounds the whole-batch gradient once; Adam's early steps move each weight by about lr = 1e-2
    // whatever the gradient's size, so the masters differ by a small fraction of one step.
    CHECK(torch::allclose(t, want.at(name), 0, 2e-3));
    CHECK(nets[0]->named()[0].second.scalar_type() == torch::kBFloat16);
  }
  // The 16-bit parameters are the masters rounded to nearest even.
  CHECK(torch::equal(nets[1]->w1, s0.at("l1.weight").to(torch::kBFloat16)));

  // ZeRO paper, bytes per rank with Psi (padded) parameters: 2 Psi params + 2 Psi grads + 12 Psi
  // optimizer (4 master + 8 Adam), the sharded parts divided by N. Adam also keeps one int64 step per tensor.
  const int64_t psi = padded(9 * 5 + 3 * 9, n) + padded(9 + 3, n);
  for (int stage : {0, 1, 2}) {
    INFO("stage " << stage);
    const EngineMemory m = engines[static_cast<std::size_t>(stage)]->memory();
    const int64_t shard = stage == 0 ? psi : psi / n;
    CHECK(m.param_bytes == 2 * psi);
    CHECK(m.grad_bytes == (stage == 2 ? 2 * psi / n : 2 * psi));
    CHECK(m.master_bytes == 4 * shard);
    const int64_t steps = stage == 0 ? 4 : 2;  // step counters: per tensor (stage 0) or per flat group
    CHECK(m.optimizer_state_bytes == 8 * shard + 8 * steps);
    const int64_t formula = stage == 0 ? 16 * psi : stage == 1 ? 4 * psi + 12 * psi / n : 2 * psi + 14 * psi / n;
    CHECK(m.param_bytes + m.grad_bytes + m.master_bytes + m.optimizer_state_bytes - 8 * steps == formula);
  }
  comm->barrier("end of test");
}

TEST_CASE("mp worker: one rank's overflow skips the step everywhere", "[.mp_worker]") {
  auto comm = hftrain_test::worker_comm();
  const int stage = std::stoi(std::getenv("HFTRAIN_TEST_STAGE"));
  PrecisionNet net;
  EngineSettings o = bf16_options(stage, 1.0);
  o.precision.scaler.dynamic = true;
  o.precision.scaler.initial_scale_power = 8;
  o.precision.scaler.hysteresis = 1;
  ZeroEngine engine(make_param_groups(net.named(), 0.0), net.order(), adamw, o, *comm);
  std::map<std::string, torch::Tensor> before;  // copies: at stage 0 master_weights() are views of the masters
  for (const auto& [name, t] : engine.master_weights()) before[name] = t.clone();
  auto x = torch::randn({4, 5}), y = torch::randn({4, 3});
  auto loss = net.loss(x, y);
  if (comm->rank() == 1) loss = loss * std::numeric_limits<float>::infinity();  // only rank 1 overflows
  engine.backward(loss, true);
  StepResult r = engine.step(1e-2);
  CHECK(r.skipped);
  CHECK(r.prev_loss_scale == 256);
  CHECK(r.loss_scale == 128);
  for (const auto& [name, t] : engine.master_weights()) CHECK(torch::equal(t, before.at(name)));
  engine.backward(net.loss(x, y), true);
  r = engine.step(1e-2);
  CHECK_FALSE(r.skipped);
  CHECK(r.loss_scale == 128);
  CHECK_FALSE(torch::equal(engine.master_weights().at("l1.weight"), before.at("l1.weight")));
  comm->barrier("end of test");
}

TEST_CASE("mp worker: bf16 collectives", "[.mp_worker]") {
  auto comm = hftrain_test::worker_comm();
  const int rank = comm->rank();
  // Values exact in bf16; sums accumulated in fp32 and rounded once.
  auto t = torch::tensor({1.0f + rank, 0.5f, 256.0f, 3.0f}).to(torch::kBFloat16);
  comm->all_reduce(t, ReduceOp::kSum, "bf16 sum");
  CHECK(torch::equal(t, torch::tensor({3.0f, 1.0f, 512.0f, 6.0f}).to(torch::kBFloat16)));
  auto input = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).to(torch::kBFloat16) * (rank + 1);
  auto out = torch::empty({2}, torch::kBFloat16);
  comm->reduce_scatter(input, {2, 2}, out, "bf16 reduce-scatter");
  CHECK(torch::equal(out, (rank == 0 ? torch::tensor({3.0f, 6.0f}) : torch::tensor({9.0f, 12.0f})).to(torch::kBFloat16)));
  auto flat = torch::zeros({4}, torch::kBFloat16);
  comm->all_gather(torch::full({2}, 0.25f * (rank + 1)).to(torch::kBFloat16), flat, "bf16 all-gather");
  CHECK(torch::equal(flat, torch::tensor({0.25f, 0.25f, 0.5f, 0.5f}).to(torch::kBFloat16)));
  auto b = torch::full({3}, 1.5f * rank).to(torch::kBFloat16);
  comm->broadcast(b, 1, "bf16 broadcast");
  CHECK(torch::equal(b, torch::full({3}, 1.5f).to(torch::kBFloat16)));
  comm->barrier("end of test");
}

// ---- the tests ------------------------------------------------------------------------------------

TEST_CASE("bf16 engine: stages 0-2 agree bitwise on 2 ranks, match one process, hold the ZeRO formula's bytes",
          "[unit][dist][precision]") {
  CHECK(hftrain_test::run_workers("mp worker: bf16 stages agree and hold the ZeRO formula's bytes", 2) == 0);
}

TEST_CASE("bf16 engine: an overflow on one rank skips the step on every rank and halves the loss scale",
          "[unit][dist][precision]") {
  for (int stage : {0, 1, 2}) {
    INFO("stage " << stage);
    CHECK(hftrain_test::run_workers("mp worker: one rank's overflow skips the step everywhere", 2, {{"HFTRAIN_TEST_STAGE", std::to_string(stage)}}) == 0);
  }
}

TEST_CASE("gloo collectives carry bfloat16 (sums in fp32, rounded once)", "[unit][dist][precision]") {
  CHECK(hftrain_test::run_workers("mp worker: bf16 collectives", 2) == 0);
}

TEST_CASE("an overflowed step leaves the weights of a run that never saw that batch", "[unit][precision]") {
  // Engine-level: bf16 with a dynamic loss scale (the scaler's code path, runnable on the CPU).
  torch::manual_seed(3);
  auto x = torch::randn({5, 6, 5}), y = torch::randn({5, 6, 3});
  EngineSettings o = bf16_options(0, 1.0);
  o.precision.scaler.dynamic = true;
  o.precision.scaler.initial_scale_power = 10;
  o.precision.scaler.hysteresis = 1;
  LocalComm comm;
  PrecisionNet a, b;
  ZeroEngine skipped(make_param_groups(a.named(), 0.1), a.order(), adamw, o, comm);
  ZeroEngine never(make_param_groups(b.named(), 0.1), b.order(), adamw, o, comm);
  std::vector<double> scales;
  for (int k = 0; k < 5; ++k) {
    auto loss = a.loss(x[k], y[k]);
    if (k == 2) loss = loss * std::numeric_limits<float>::infinity();
    skipped.backward(loss, true);
    StepResult r = skipped.step(1e-2);
    CHECK(r.skipped == (k == 2));
    scales.push_back(r.loss_scale);
    if (k == 2) continue;
    never.backward(b.loss(x[k], y[k]), true);
    never.step(1e-2);
  }
  CHECK(scales == std::vector<double>{1024, 1024, 512, 512, 512});
  // The scales differ after the overflow (512 vs 1024) but both are powers of two, so the scaled bf16
  // gradients unscale to the same fp32 values: the runs stay bitwise equal.
  const auto wa = skipped.master_weights(), wb = never.master_weights();
  for (const auto& [name, t] : wa) {
    INFO(name);
    CHECK(torch::equal(t, wb.at(name)));
  }
  CHECK(torch::equal(a.w1, b.w1));
}
