// Expert parallelism's dispatch around a rank's local experts (see expert_parallel.h). After the exchange the
// received rows are member-major (member s's rows for local expert 0, 1, ...); they are regrouped expert-major so
// that each local expert takes every member's rows in one GEMM, and put back member-major before the return trip.
#include "models/expert_parallel.h"

#include <numeric>

#include "distributed/expert_exchange.h"
#include "models/expert_names.h"

namespace hftrain {

std::string ExpertParallel::experts_problem(int64_t experts) const {
  if (experts % size() == 0) return "";
  return "distributed.expert_parallel_size: " + std::to_string(size()) + " does not divide the " + std::to_string(experts) +
         " experts of each routed layer (each member of a group runs an equal share of them)";
}

int64_t ExpertParallel::member_of_parameter(const std::string& name) const {
  const int64_t expert = routed_expert_name(name).expert;
  return expert >= 0 && expert < experts_ ? expert / (experts_ / size()) : -1;
}

torch::Tensor ExpertParallel::run(const torch::Tensor& rows, const torch::Tensor& counts, const LocalExperts& run_local,
                                  const std::string& what) const {
  const int64_t P = size(), E = counts.numel(), L = E / P, first = rank() * L;
  const int64_t* mine = counts.data_ptr<int64_t>();
  // every member's rows per expert, [member][expert]
  const std::vector<std::vector<int64_t>> all = group_->all_gather_ints(std::vector<int64_t>(mine, mine + E), what + " counts");
  std::vector<int64_t> send(static_cast<std::size_t>(P)), recv(static_cast<std::size_t>(P)), per_expert(static_cast<std::size_t>(L));
  for (int64_t j = 0; j < P; ++j) {
    send[j] = std::accumulate(mine + j * L, mine + (j + 1) * L, int64_t{0});
    for (int64_t i = 0; i < L; ++i) recv[j] += all[j][first + i], per_expert[i] += all[j][first + i];
  }
  const torch::Tensor got = exchange_expert_rows(rows, send, recv, *group_, what);
  // expert-major order of the received rows: for local expert i, member s's run of it
  std::vector<int64_t> order;
  order.reserve(static_cast<std::size_t>(got.size(0)));
  for (int64_t i = 0; i < L; ++i) {
    int64_t member_start = 0;
    for (int64_t s = 0; s < P; ++s) {
      const int64_t begin = member_start + std::accumulate(all[s].begin() + first, all[s].begin() + first + i, int64_t{0});
      for (int64_t r = 0; r < all[s][first + i]; ++r) order.push_back(begin + r);
      member_start += recv[s];
    }
  }
  const torch::Tensor by_expert =
      (order.empty() ? torch::empty({0}, torch::kLong) : torch::tensor(order, torch::kLong)).to(rows.device());
  const torch::Tensor outputs = run_local(got.index_select(0, by_expert), first, per_expert);
  const torch::Tensor by_member = torch::empty_like(by_expert).index_put_({by_expert}, torch::arange(by_expert.numel(), by_expert.options()));
  return exchange_expert_rows(outputs.index_select(0, by_member), recv, send, *group_, what + " outputs");
}

}  // namespace hftrain
