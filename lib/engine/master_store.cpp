// fp32 master weights in memory or in the swap file (see master_store.h).
#include "engine/master_store.h"

#include "offload/swapped_optimizer.h"

namespace hftrain {

std::string flat_group_key(std::size_t g) { return "flat_group_" + std::to_string(g); }

MasterStore::MasterStore(Comm& comm, const PartitionMap& map, bool whole_groups)
    : comm_(comm), map_(map), whole_groups_(whole_groups) {}

bool MasterStore::in_swap_file(std::size_t g) const {
  return swapped_ && map_.groups[g].numel > 0 && map_.groups[g].held_by(comm_.rank());  // the optimizer's groups
}

torch::Tensor MasterStore::values(std::size_t g) const {
  if (!in_swap_file(g)) return masters_[g];
  return swapped_->read_params(flat_group_key(g));
}

torch::Tensor MasterStore::gathered(std::size_t g) {
  // One rank holds the whole group: no gather, no copy (of memory-resident masters: the live ones).
  if (whole_groups_ || comm_.world_size() == 1) return values(g);
  const FlatGroupInfo& info = map_.groups[g];
  const torch::Tensor mine = values(g);
  if (info.holders() < comm_.world_size()) {
    // Held by some ranks only (expert data parallelism): each holder's partition sits once in the world's sum.
    auto full = torch::zeros({info.padded_numel}, mine.options());
    if (info.held_by(comm_.rank())) full.narrow(0, info.partition_begin(comm_.rank()), mine.numel()).copy_(mine);
    if (info.padded_numel > 0) comm_.all_reduce(full, ReduceOp::kSum, "fp32 master weights of group " + std::to_string(g));
    return full;
  }
  auto full = torch::empty({info.padded_numel}, mine.options());
  if (info.padded_numel > 0) comm_.all_gather(mine, full, "fp32 master weights of group " + std::to_string(g));
  return full;
}

void MasterStore::store(std::size_t g, const torch::Tensor& values) {
  const int64_t n = values.numel();
  if (in_swap_file(g)) {
    auto partition = torch::zeros({masters_[g].numel()}, torch::kFloat32);
    partition.narrow(0, 0, n).copy_(values.reshape({-1}));
    swapped_->write_params(flat_group_key(g), partition);
    if (on_store_) on_store_(g, partition);
    return;
  }
  masters_[g].narrow(0, 0, n).copy_(values.reshape({-1}));
  if (on_store_) on_store_(g, masters_[g]);
}

int64_t MasterStore::bytes() const {
  int64_t bytes = 0;
  for (const auto& m : masters_) bytes += m.defined() ? static_cast<int64_t>(m.nbytes()) : 0;
  return bytes;
}

}  // namespace hftrain
