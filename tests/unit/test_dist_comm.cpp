// Collectives and the data-parallel engine across real worker processes on loopback. Each test case
// launches copies of this test binary (through the launcher) that run one hidden "[.dist_worker]"
// case; a worker fails its case (exit code != 0) when a check fails. Expected values are computed by
// hand or, for the engine, by a single-process LocalEngine run over the whole batch inside each worker.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <thread>

#include "distributed/comm.h"
#include "distributed/env.h"
#include "distributed/launcher.h"
#include "distributed/sequence_exchange.h"
#include "dist_workers.h"
#include "lazy_device.h"
#include "engine/zero_engine.h"
#include "optim/adamw.h"
#include "optimizer_test_helpers.h"

using hftrain_test::adamw;

using namespace hftrain;
using hftrain_test::run_workers;
using hftrain_test::worker_comm;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// A tiny two-layer network whose parameter sizes do not divide evenly (padding), with biases (two
// optimizer groups) and enough tensors for several buckets.
struct Net {
  torch::Tensor w1, b1, w2, b2;
  Net() {
    torch::manual_seed(7);
    w1 = (torch::randn({5, 3}) * 0.5).requires_grad_();
    b1 = torch::zeros({5}).requires_grad_();
    w2 = (torch::randn({2, 5}) * 0.5).requires_grad_();
    b2 = torch::zeros({2}).requires_grad_();
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    auto h = torch::tanh(torch::addmm(b1, x, w1.t()));
    return torch::mse_loss(torch::addmm(b2, h, w2.t()), y);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named() {
    return {{"l1.weight", w1}, {"l1.bias", b1}, {"l2.weight", w2}, {"l2.bias", b2}};
  }
};

}  // namespace

// ---- workers --------------------------------------------------------------------------------------

TEST_CASE("dist worker: collectives", "[.dist_worker]") {
  auto comm = worker_comm();
  const int rank = comm->rank(), n = comm->world_size();
  REQUIRE(n == 3);
  auto t = torch::tensor({rank + 1.0f, 10.0f * (rank + 1)});
  comm->all_reduce(t, ReduceOp::kSum, "test sum");
  CHECK(t[0].item<float>() == 6.0f);
  CHECK(t[1].item<float>() == 60.0f);
  auto m = torch::tensor({static_cast<float>(rank)});
  comm->all_reduce(m, ReduceOp::kMax, "test max");
  CHECK(m.item<float>() == 2.0f);

  // Uneven reduce-scatter (the all-to-all fallback): segments of 3, 2 and 0 elements.
  auto input = torch::arange(5, torch::kFloat32) + 100.0f * rank;
  const std::vector<int64_t> counts = {3, 2, 0};
  auto out = torch::empty({counts[static_cast<std::size_t>(rank)]}, torch::kFloat32);
  comm->reduce_scatter(input, counts, out, "test reduce-scatter");
  if (rank == 0) CHECK(torch::equal(out, torch::tensor({300.0f, 303.0f, 306.0f})));
  if (rank == 1) CHECK(torch::equal(out, torch::tensor({309.0f, 312.0f})));
  if (rank == 2) CHECK(out.numel() == 0);
  CHECK(comm->stats().bytes_sent.at("reduce_scatter") == static_cast<uint64_t>((5 - counts[static_cast<std::size_t>(rank)]) * 4));

  // All-gather (the list fallback) into one flat buffer.
  auto flat = torch::zeros({6});
  comm->all_gather(torch::full({2}, static_cast<float>(rank)), flat, "test all-gather");
  CHECK(torch::equal(flat, torch::tensor({0.0f, 0.0f, 1.0f, 1.0f, 2.0f, 2.0f})));
  CHECK(comm->stats().bytes_sent.at("all_gather") == 16u);  // (N-1) * 8 bytes

  auto b = torch::full({3}, static_cast<float>(rank));
  comm->broadcast(b, 1, "test broadcast");
  CHECK(torch::equal(b, torch::full({3}, 1.0f)));
  CHECK(comm->all_reduce_scalar(rank * 0.5, ReduceOp::kSum, "scalar") == 1.5);
  auto ints = comm->all_gather_ints({rank, 10 * rank}, "ints");
  CHECK(ints[2] == std::vector<int64_t>{2, 20});
  // Ring all-reduce: 2 (N-1)/N of the buffer: two 8-byte and one 4-byte all-reduce, one 8-byte scalar.
  CHECK(comm->stats().bytes_sent.at("all_reduce") == 2 * 8 * 2 / 3 + 2 * 4 * 2 / 3 + 2 * 8 * 2 / 3);

  // All-to-all of equal segments (bf16 travels as its bits): rank r sends 10 r + j to rank j.
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto in = (torch::arange(3, torch::kFloat32) + 10.0f * rank).repeat_interleave(2).to(dtype);
    auto received = torch::empty({6}, dtype);
    comm->all_to_all(in, received, "test all-to-all");
    CHECK(torch::equal(received.to(torch::kFloat32), torch::tensor({0.f, 0.f, 10.f, 10.f, 20.f, 20.f}) + static_cast<float>(rank)));
  }
  CHECK(comm->stats().bytes_sent.at("all_to_all") == 24 * 2 / 3 + 12 * 2 / 3);

  // Groups: {0, 2} and {1}; each group's collectives stay inside it, and groups of the same ranks may repeat.
  const std::vector<int> members = rank == 1 ? std::vector<int>{1} : std::vector<int>{0, 2};
  auto group = comm->subgroup(members, rank == 1 ? "solo" : "pair");
  CHECK(group->world_size() == static_cast<int>(members.size()));
  CHECK(group->rank() == (rank == 2 ? 1 : 0));
  auto g = torch::tensor({rank + 1.0f});
  group->all_reduce(g, ReduceOp::kSum, "group sum");
  CHECK(g.item<float>() == (rank == 1 ? 2.0f : 4.0f));
  if (rank != 1) {
    auto exchanged = torch::empty({2});
    group->all_to_all(torch::tensor({rank * 10.0f, rank * 10.0f + 1}), exchanged, "group all-to-all");
    CHECK(torch::equal(exchanged, rank == 0 ? torch::tensor({0.f, 20.f}) : torch::tensor({1.f, 21.f})));
  }
  if (rank == 2) CHECK_THROWS_WITH(comm->subgroup({0, 1}, "others"), Catch::Contains("group others: rank 2 is not a member"));
  comm->barrier("end of test");
}

// Tensors on a device other than the host (torch's lazy device, tests/unit/lazy_device.h) go through host
// copies: the results land in the device tensors, and the bytes counted are the payload's, as on the host.
TEST_CASE("dist worker: device tensors through host memory", "[.dist_worker]") {
  auto comm = worker_comm();
  const int rank = comm->rank();
  REQUIRE(comm->world_size() == 2);
  const torch::Device lazy = hftrain_test::lazy_device();
  auto t = torch::tensor({rank + 1.0f, 10.0f * (rank + 1)}).to(lazy);
  comm->all_reduce(t, ReduceOp::kSum, "device sum");
  CHECK(t.device() == lazy);
  CHECK(torch::equal(t.to(torch::kCPU), torch::tensor({3.0f, 30.0f})));
  auto input = (torch::arange(5, torch::kFloat32) + 100.0f * rank).to(lazy);
  const std::vector<int64_t> counts = {3, 2};
  auto out = torch::empty({counts[static_cast<std::size_t>(rank)]}, torch::TensorOptions().device(lazy));
  auto pending = comm->reduce_scatter_async(input, counts, out, "device reduce-scatter");
  pending->wait();
  pending->wait();  // waiting twice is a no-op (the copy back happens once)
  CHECK(out.device() == lazy);
  if (rank == 0) CHECK(torch::equal(out.to(torch::kCPU), torch::tensor({100.0f, 102.0f, 104.0f})));
  if (rank == 1) CHECK(torch::equal(out.to(torch::kCPU), torch::tensor({106.0f, 108.0f})));
  auto flat = torch::zeros({4}).to(lazy);
  comm->all_gather(torch::full({2}, static_cast<float>(rank)).to(lazy), flat, "device all-gather");
  CHECK(torch::equal(flat.to(torch::kCPU), torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})));
  auto b = torch::full({3}, static_cast<float>(rank + 5)).to(lazy);
  comm->broadcast(b, 1, "device broadcast");
  CHECK(torch::equal(b.to(torch::kCPU), torch::full({3}, 6.0f)));
  CHECK(comm->stats().bytes_sent.at("all_gather") == 8u);
  CHECK(comm->stats().bytes_sent.at("reduce_scatter") == static_cast<uint64_t>((5 - counts[static_cast<std::size_t>(rank)]) * 4));
  comm->barrier("end of test");
}

TEST_CASE("dist worker: collective timeout", "[.dist_worker]") {
  // 5 s also bounds the rendezvous, which must survive slow process start-up on a loaded machine.
  auto comm = worker_comm(5000);
  if (comm->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(12));  // never joins the collective
    return;
  }
  auto t = torch::ones({4});
  try {
    comm->all_reduce(t, ReduceOp::kSum, "gradient bucket 1/1");
    FAIL("the all-reduce should have timed out");
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("all_reduce") != std::string::npos);
    CHECK(msg.find("gradient bucket 1/1") != std::string::npos);
    CHECK(msg.find("ddp_timeout") != std::string::npos);
    CHECK(msg.find("rank 0") != std::string::npos);
  }
}

TEST_CASE("dist worker: engine matches one process", "[.dist_worker]") {
  auto comm = worker_comm();
  const int rank = comm->rank(), n = comm->world_size();
  const int stage = std::stoi(env_or("HFTRAIN_TEST_STAGE", "0"));
  // The global batch: 6 examples per micro-step, 2 micro-steps per window; rank r takes rows r::n.
  torch::manual_seed(11);
  auto x = torch::randn({4, 2 * 6, 3});  // 4 micro-steps = 2 windows
  auto y = torch::randn({4, 2 * 6, 2});
  auto rows = torch::arange(rank, 12, n);

  Net ref;
  auto ref_groups = make_param_groups(ref.named(), 0.1);
  std::vector<torch::Tensor> ref_params;
  for (auto& np : ref.named()) ref_params.push_back(np.second);
  LocalEngine local(ref_params, adamw(ref_groups), /*max_grad_norm=*/0.5);

  Net net;
  EngineSettings o;
  o.stage = stage;
  o.max_grad_norm = 0.5;
  o.bucket_cap_mb = 40.0 / (1024 * 1024);  // 10 floats: several buckets
  o.report_memory = false;
  o.offload_to_host = env_or("HFTRAIN_TEST_OFFLOAD", "0") == "1";  // masters and optimizer state as separate host copies
  std::vector<std::string> order;
  for (auto& np : net.named()) order.push_back(np.first);
  ZeroEngine engine(make_param_groups(net.named(), 0.1), order, adamw, o, *comm);
  CHECK(engine.bucket_count() >= 3);
  CHECK((engine.describe().find("offloaded to host memory") != std::string::npos) == o.offload_to_host);

  for (int window = 0; window < 2; ++window) {
    for (int m = 0; m < 2; ++m) {
      const int k = 2 * window + m;
      local.backward(ref.loss(x[k], y[k]) / 2.0, m == 1);
      engine.backward(net.loss(x[k].index_select(0, rows), y[k].index_select(0, rows)) / 2.0, m == 1);
    }
    StepResult a = local.step(1e-2);
    StepResult b = engine.step(1e-2);
    CHECK(b.grad_norm.value() == Approx(a.grad_norm.value()).epsilon(1e-5));
    CHECK_FALSE(b.skipped);
  }
  auto refs = ref.named(), mine = net.named();
  for (std::size_t i = 0; i < refs.size(); ++i) {
    INFO(refs[i].first);
    CHECK(torch::allclose(mine[i].second, refs[i].second, 1e-5, 1e-6));
  }
  // Memory: stages 1-2 keep optimizer state (exp_avg + exp_avg_sq) for the partition only, stage 2 the
  // gradients too; the partition of both groups is (padded 30 + 8 elements) / n per rank.
  const EngineMemory mem = engine.memory();
  const int64_t total = 5 * 3 + 2 * 5, biases = 5 + 2;
  auto padded = [n](int64_t numel) { return (numel + 2 * n - 1) / (2 * n) * (2 * n); };
  const int64_t partition = (padded(total) + padded(biases)) / n;
  if (stage >= 1) CHECK(mem.optimizer_state_bytes == 2 * partition * 4 + 2 * 8);
  if (stage == 2) CHECK(mem.grad_bytes == partition * 4);
  if (stage <= 1) CHECK(mem.grad_bytes == (padded(total) + padded(biases)) * 4);
  comm->barrier("end of test");
}

TEST_CASE("dist worker: non-finite gradients are a global vote", "[.dist_worker]") {
  auto comm = worker_comm();
  Net net;
  EngineSettings o;
  o.stage = std::stoi(env_or("HFTRAIN_TEST_STAGE", "2"));
  o.skip_nonfinite_steps = true;
  o.report_memory = false;
  std::vector<std::string> order;
  for (auto& np : net.named()) order.push_back(np.first);
  ZeroEngine engine(make_param_groups(net.named(), 0.0), order, adamw, o, *comm);
  auto before = net.w1.detach().clone();
  auto x = torch::randn({4, 3}), y = torch::randn({4, 2});
  auto loss = net.loss(x, y);
  if (comm->rank() == 1) loss = loss * std::numeric_limits<float>::infinity();  // only rank 1 overflows
  engine.backward(loss, true);
  StepResult r = engine.step(1e-2);
  CHECK(r.skipped);
  CHECK_FALSE(std::isfinite(r.grad_norm.value()));
  CHECK(torch::equal(net.w1, before));
  // The next, finite step goes through on every rank.
  engine.backward(net.loss(x, y), true);
  r = engine.step(1e-2);
  CHECK_FALSE(r.skipped);
  CHECK_FALSE(torch::equal(net.w1, before));
  comm->barrier("end of test");
}

// Ulysses: each rank holds a slice of the sequence; heads are traded for sequence before attention and back
// after it. Every rank computes the whole-sequence reference itself (same seed): causal grouped-query
// attention (4 query heads, 2 kv heads) over 8 positions, a weighted sum as the loss; the slices' outputs and
// the gradients that reach them through both exchanges' backward must equal the reference's slices.
TEST_CASE("dist worker: Ulysses exchange", "[.dist_worker]") {
  auto comm = worker_comm();
  const int rank = comm->rank(), P = comm->world_size();
  const int64_t H = 4, KV = 2, T = 8, D = 3, S = T / P;
  torch::manual_seed(11);
  const auto q = torch::randn({1, H, T, D}, torch::kFloat64), k = torch::randn({1, KV, T, D}, torch::kFloat64);
  const auto v = torch::randn({1, KV, T, D}, torch::kFloat64), w = torch::randn({1, H, T, D}, torch::kFloat64);
  auto attention = [](const torch::Tensor& qh, const torch::Tensor& kh, const torch::Tensor& vh) {
    const int64_t groups = qh.size(1) / kh.size(1), n = qh.size(2);
    auto scores = torch::matmul(qh, kh.repeat_interleave(groups, 1).transpose(-1, -2)) / std::sqrt(static_cast<double>(qh.size(3)));
    scores = scores.masked_fill(torch::ones({n, n}, torch::kBool).triu(1), -INFINITY);
    return torch::matmul(torch::softmax(scores, -1), vh.repeat_interleave(groups, 1));
  };
  std::vector<torch::Tensor> full = {q.clone().requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()};
  const auto reference = attention(full[0], full[1], full[2]);
  (reference * w).sum().backward();

  auto slice = [&](const torch::Tensor& t) { return t.narrow(2, rank * S, S); };
  std::vector<torch::Tensor> mine;
  for (const auto& t : {q, k, v}) mine.push_back(slice(t).clone().requires_grad_());
  auto heads = [&](const torch::Tensor& t) { return sequence_to_heads(t, *comm, "test attention inputs"); };
  const auto out = heads_to_sequence(attention(heads(mine[0]), heads(mine[1]), heads(mine[2])), *comm, "test attention output");
  REQUIRE(out.sizes() == torch::IntArrayRef({1, H, S, D}));
  CHECK(torch::allclose(out, slice(reference), 0, 1e-12));
  (out * slice(w)).sum().backward();
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("input " << i);
    CHECK(torch::allclose(mine[i].grad(), slice(full[i].grad()), 0, 1e-12));
  }
  CHECK_THROWS_WITH(sequence_to_heads(torch::zeros({1, 3, S, D}), *comm, "odd heads"),
                    Catch::Contains("odd heads: 3 heads do not divide over sequence_parallel_size 2"));
}

// ---- the tests ------------------------------------------------------------------------------------

TEST_CASE("gloo collectives and their fallbacks give hand-computed results on 3 processes", "[unit][dist]") {
  CHECK(run_workers("dist worker: collectives", 3) == 0);
}

TEST_CASE("gloo collectives stage device tensors through host memory", "[unit][dist][device]") {
  CHECK(run_workers("dist worker: device tensors through host memory", 2) == 0);
}

TEST_CASE("a collective that does not finish within ddp_timeout names the operation", "[unit][dist]") {
  CHECK(run_workers("dist worker: collective timeout", 2) == 0);
}

TEST_CASE("Ulysses' all-to-all exchanges give whole-sequence attention and its gradients on 2 processes", "[unit][dist]") {
  CHECK(run_workers("dist worker: Ulysses exchange", 2) == 0);
}

TEST_CASE("data-parallel engine stages 0-2 equal one process over the global batch", "[unit][dist]") {
  for (int stage : {0, 1, 2})
    for (int n : {2, 3}) {
      INFO("stage " << stage << ", world size " << n);
      CHECK(run_workers("dist worker: engine matches one process", n, {{"HFTRAIN_TEST_STAGE", std::to_string(stage)}}) == 0);
    }
}

TEST_CASE("data-parallel engine stages 1-2 with the optimizer offloaded to host memory equal one process", "[unit][dist]") {
  for (int stage : {1, 2}) {
    INFO("stage " << stage << ", offload_optimizer cpu, world size 2");
    CHECK(run_workers("dist worker: engine matches one process", 2,
                      {{"HFTRAIN_TEST_STAGE", std::to_string(stage)}, {"HFTRAIN_TEST_OFFLOAD", "1"}}) == 0);
  }
}

TEST_CASE("data-parallel engine skips a step on every rank when one rank's gradients overflow", "[unit][dist]") {
  for (int stage : {0, 2}) {
    INFO("stage " << stage);
    CHECK(run_workers("dist worker: non-finite gradients are a global vote", 2, {{"HFTRAIN_TEST_STAGE", std::to_string(stage)}}) == 0);
  }
}
