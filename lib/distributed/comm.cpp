// Comm helpers, the single-process communicator and the process-wide world (see comm.h).
#include "distributed/comm.h"

#include "distributed/collective_work.h"
#include "util/error.h"

namespace hftrain {
namespace {

class DonePending : public PendingOp {
 public:
  void wait() override {}
};

std::unique_ptr<Comm>& world_slot() {
  static std::unique_ptr<Comm> comm = std::make_unique<LocalComm>();
  return comm;
}

}  // namespace

uint64_t CommStats::total_bytes() const {
  uint64_t t = 0;
  for (const auto& kv : bytes_sent) t += kv.second;
  return t;
}

void Comm::count(const std::string& op, uint64_t bytes) {
  stats_.bytes_sent[op] += bytes;
  stats_.calls[op] += 1;
}

double Comm::all_reduce_scalar(double value, ReduceOp op, const std::string& what) {
  auto t = torch::tensor({value}, torch::kFloat64);
  all_reduce(t, op, what);
  return t.item<double>();
}

std::vector<std::vector<int64_t>> Comm::all_gather_ints(const std::vector<int64_t>& values, const std::string& what) {
  const auto n = static_cast<int64_t>(values.size());
  auto in = torch::tensor(values, torch::kLong);
  if (n == 0) in = torch::empty({0}, torch::kLong);
  auto out = torch::empty({n * world_size()}, torch::kLong);
  all_gather(in, out, what);
  std::vector<std::vector<int64_t>> result(static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r)
    for (int64_t i = 0; i < n; ++i) result[static_cast<std::size_t>(r)].push_back(out[r * n + i].item<int64_t>());
  return result;
}

std::unique_ptr<PendingOp> LocalComm::all_reduce_async(torch::Tensor, ReduceOp, const std::string&) {
  return std::make_unique<DonePending>();
}

std::unique_ptr<PendingOp> LocalComm::reduce_scatter_async(torch::Tensor input, std::vector<int64_t> counts,
                                                           torch::Tensor output, const std::string& what) {
  if (counts.size() != 1 || counts[0] != input.numel() || output.numel() != input.numel())
    throw RuntimeFailure("reduce_scatter (" + what + "): segment counts do not match the tensors");
  torch::NoGradGuard no_grad;
  if (!output.is_same(input)) output.copy_(input);
  return std::make_unique<DonePending>();
}

std::unique_ptr<PendingOp> LocalComm::all_gather_async(torch::Tensor input, torch::Tensor output, const std::string& what) {
  if (output.numel() != input.numel()) throw RuntimeFailure("all_gather (" + what + "): output size mismatch");
  torch::NoGradGuard no_grad;
  if (!output.is_same(input)) output.copy_(input.reshape_as(output));
  return std::make_unique<DonePending>();
}

std::unique_ptr<PendingOp> LocalComm::broadcast_async(torch::Tensor, int, const std::string&) {
  return std::make_unique<DonePending>();
}

std::unique_ptr<PendingOp> LocalComm::all_to_all_async(torch::Tensor input, torch::Tensor output, const std::string& what) {
  if (output.numel() != input.numel()) throw RuntimeFailure("all_to_all (" + what + "): output size mismatch");
  torch::NoGradGuard no_grad;
  if (!output.is_same(input)) output.copy_(input.reshape_as(output));
  return std::make_unique<DonePending>();
}

std::unique_ptr<PendingOp> LocalComm::all_to_all_v_async(torch::Tensor input, std::vector<int64_t> in_counts,
                                                         torch::Tensor output, std::vector<int64_t> out_counts,
                                                         const std::string& what) {
  check_split_counts(input, in_counts, output, out_counts, 1, 0, what);
  torch::NoGradGuard no_grad;
  if (!output.is_same(input)) output.copy_(input.reshape_as(output));
  return std::make_unique<DonePending>();
}

std::unique_ptr<Comm> LocalComm::subgroup(const std::vector<int>& ranks, const std::string& name) {
  rank_in_group(ranks, 0, 1, name);
  return std::make_unique<LocalComm>();
}

int rank_in_group(const std::vector<int>& ranks, int rank, int world_size, const std::string& name) {
  int index = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size || (i > 0 && ranks[i] <= ranks[i - 1]))
      throw RuntimeFailure("group " + name + ": ranks must be ascending world ranks below " + std::to_string(world_size));
    if (ranks[i] == rank) index = static_cast<int>(i);
  }
  if (index < 0) throw RuntimeFailure("group " + name + ": rank " + std::to_string(rank) + " is not a member");
  return index;
}

Comm& world() { return *world_slot(); }

void set_world(std::unique_ptr<Comm> comm) { world_slot() = std::move(comm); }

}  // namespace hftrain
