// Expert parallelism on real worker processes: the uneven all-to-all against hand-computed segments (zero counts
// included), and a routed block whose experts run on the members of a group equal to the same block running every
// expert in-process: each rank's outputs and input gradients, and every parameter gradient summed over the ranks
// (what the engine's reduction adds up), in float64; the settings and refusals of distributed.expert_parallel_size.
#include <catch2/catch.hpp>

#include <numeric>

#include "dist_workers.h"
#include "distributed/parallel_layout.h"
#include "models/moe.h"
#include "seq2seq_model_helpers.h"

using namespace hftrain;
using hftrain_test::run_workers;
using hftrain_test::worker_comm;

namespace {

// Rank r sends (r + 1) * (j + 1) - 1 elements to rank j, each value 100 r + j + 0.5 k (k its index in the segment).
double sent_value(int from, int to, int64_t k) { return 100.0 * from + to + 0.5 * static_cast<double>(k); }
int64_t sent_count(int from, int to) { return static_cast<int64_t>(from + 1) * (to + 1) - 1; }

// The routed block of `experts` experts, top-2, with the shared expert when `shared`, in float64, its parameters
// drawn from seed 7 (the same on every rank).
std::shared_ptr<SparseMoe> block_of(int64_t experts, bool shared, std::shared_ptr<RouterRecord> record) {
  MoeSpec spec;
  spec.hidden_size = 6, spec.expert_size = 5, spec.experts = experts, spec.top_k = 2, spec.record = std::move(record);
  spec.shared_expert_size = shared ? 4 : 0;
  torch::manual_seed(7);
  auto block = std::make_shared<SparseMoe>(spec);
  block->to(torch::kFloat64);
  block->train();
  return block;
}

}  // namespace

TEST_CASE("dist worker: uneven all-to-all", "[.dist_worker]") {
  auto comm = worker_comm();
  const int rank = comm->rank(), n = comm->world_size();
  std::vector<int64_t> in_counts, out_counts;
  std::vector<double> values;
  for (int j = 0; j < n; ++j) {
    in_counts.push_back(sent_count(rank, j));
    out_counts.push_back(sent_count(j, rank));
    for (int64_t k = 0; k < in_counts.back(); ++k) values.push_back(sent_value(rank, j, k));
  }
  const torch::Tensor input = torch::tensor(values, torch::kFloat64);
  torch::Tensor output = torch::empty({std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0})}, torch::kFloat64);
  comm->all_to_all_v(input, in_counts, output, out_counts, "test segments");
  int64_t at = 0;
  for (int j = 0; j < n; ++j)
    for (int64_t k = 0; k < sent_count(j, rank); ++k, ++at) {
      INFO("from rank " << j << ", element " << k);
      CHECK(output[at].item<double>() == sent_value(j, rank, k));
    }
  CHECK(comm->stats().bytes_sent.at("all_to_all_v") == (values.size() - static_cast<std::size_t>(in_counts[rank])) * 8);
  std::vector<int64_t> wrong = in_counts;
  wrong[0] += 1;
  CHECK_THROWS_WITH(comm->all_to_all_v(input, wrong, output, out_counts, "bad counts"),
                    Catch::Contains("all_to_all_v (bad counts)"));
}

TEST_CASE("dist worker: expert-parallel routed block", "[.dist_worker]") {
  auto comm = worker_comm();
  ParallelLayout layout;
  add_expert_groups(layout, *comm, comm->world_size());
  REQUIRE(layout.expert_group);
  const int rank = comm->rank();
  for (const bool shared : {false, true}) {
    INFO("shared expert " << shared);
    const int64_t experts = 2 * comm->world_size();
    auto record = std::make_shared<RouterRecord>();
    auto parallel = block_of(experts, shared, record), local = block_of(experts, shared, nullptr);
    record->expert_parallel = std::make_shared<ExpertParallel>(layout.expert_group);
    torch::manual_seed(100 + rank);  // each rank's own tokens, routed differently
    const torch::Tensor x = torch::randn({9 + rank, 6}, torch::kFloat64), w = torch::randn({9 + rank, 6}, torch::kFloat64);
    const torch::Tensor xp = x.clone().requires_grad_(), xl = x.clone().requires_grad_();
    const torch::Tensor yp = parallel->forward(xp), yl = local->forward(xl);
    CHECK(torch::allclose(yp, yl, 0, 1e-12));
    (yp * w).sum().backward();
    (yl * w).sum().backward();
    CHECK(torch::allclose(xp.grad(), xl.grad(), 0, 1e-12));
    // summed over the ranks: a member's expert gradient holds the whole group's rows, the others' are zero
    const auto got = parallel->named_parameters(), want = local->named_parameters();
    for (const auto& p : want) {
      INFO(p.key());
      const torch::Tensor g = got[p.key()].grad(), e = p.value().grad();
      REQUIRE(g.defined());
      torch::Tensor sums = torch::stack({g, e});
      comm->all_reduce(sums, ReduceOp::kSum, "test gradients");
      CHECK(torch::allclose(sums[0], sums[1], 0, 1e-12));
    }
    // evaluation runs every expert here, without the group
    parallel->eval();
    torch::NoGradGuard no_grad;
    CHECK(torch::allclose(parallel->forward(x), local->forward(x), 0, 1e-12));
  }
  const int64_t odd = 2 * comm->world_size() + 1;
  CHECK_THAT(ExpertParallel(layout.expert_group).experts_problem(odd),
             Catch::Contains("does not divide the " + std::to_string(odd) + " experts"));
}

TEST_CASE("the uneven all-to-all gives hand-computed segments on 3 processes", "[unit][dist][expert_parallel]") {
  CHECK(run_workers("dist worker: uneven all-to-all", 3) == 0);
}

TEST_CASE("a routed block whose experts run over 2 and 3 processes equals every expert run in-process",
          "[unit][dist][expert_parallel][moe]") {
  for (int n : {2, 3}) {
    INFO("world size " << n);
    CHECK(run_workers("dist worker: expert-parallel routed block", n) == 0);
  }
}

TEST_CASE("distributed.expert_parallel_size: the world it needs and the models that refuse it", "[unit][expert_parallel]") {
  LocalComm one;
  ParallelLayout layout;
  CHECK_THROWS_WITH(add_expert_groups(layout, one, 2), Catch::Contains("distributed.expert_parallel_size: 2 must divide the world size 1"));
  add_expert_groups(layout, one, 1);
  CHECK(!layout.expert_group);
  auto group = std::make_shared<ExpertParallel>(std::shared_ptr<Comm>(std::make_shared<LocalComm>()));
  auto llama = hftrain_test::build_model("llama", "{hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, "
                                                  "num_attention_heads: 2, vocab_size: 32, max_position_embeddings: 16}", 1);
  CHECK_THROWS_WITH(llama->set_expert_parallel(group), Catch::Contains("model type 'llama' has no routed experts"));
}
