// MasterStore: the master-weight axis of the ZeRO engine. Holds the fp32 weights the optimizer updates,
// one tensor per flat group: the whole group (stage 0 with mixed precision) or this rank's partition
// (stages 1-3), resident in memory (possibly a view of the fp32 parameters themselves) or, with NVMe
// offload of separate masters, in the swap file of a SwappedOptimizer. Every read and write of master
// values goes through here, so the rest of the engine does not care where they live.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "engine/partition.h"
#include "util/torch_compat.h"

namespace hftrain {

class SwappedOptimizer;

// The name of flat group g in optimizer state and swap files.
std::string flat_group_key(std::size_t g);

class MasterStore {
 public:
  // `whole_groups`: each master is the whole padded group (no partitioning); otherwise this rank's partition.
  MasterStore(Comm& comm, const PartitionMap& map, bool whole_groups);

  // Group g's masters, in group order.
  void add(torch::Tensor masters) { masters_.push_back(std::move(masters)); }
  // From now on the values live in `swapped`'s file (its parameters are these masters).
  void move_to(SwappedOptimizer* swapped) { swapped_ = swapped; }
  // Called after store() with the group's new fp32 partition values (mixed precision refreshes its
  // 16-bit copy from them).
  void on_store(std::function<void(std::size_t group, const torch::Tensor& values)> callback) { on_store_ = std::move(callback); }

  std::size_t size() const { return masters_.size(); }
  bool empty() const { return masters_.empty(); }
  bool swapped() const { return swapped_ != nullptr; }
  SwappedOptimizer* swap() const { return swapped_; }
  // The resident tensors (the optimizer's parameters; while swapped, their storage is the swap buffer's).
  torch::Tensor& tensor(std::size_t g) { return masters_[g]; }
  const torch::Tensor& tensor(std::size_t g) const { return masters_[g]; }
  const std::vector<torch::Tensor>& tensors() const { return masters_; }

  // This rank's values of group g (read from the swap file when they live there).
  torch::Tensor values(std::size_t g) const;
  // The values of the whole group g gathered from every rank (collective over the world, also for a group only
  // some ranks hold); the live masters when this rank holds the whole group.
  torch::Tensor gathered(std::size_t g);
  // Sets the first values.numel() elements of group g (the rest: as they were, or 0 when swapped).
  void store(std::size_t g, const torch::Tensor& values);
  int64_t bytes() const;  // resident or offloaded, as swapped() says

 private:
  // Whether group g's values live in the swap file (a group this rank holds, with elements).
  bool in_swap_file(std::size_t g) const;
  Comm& comm_;
  const PartitionMap& map_;
  bool whole_groups_;
  std::vector<torch::Tensor> masters_;
  SwappedOptimizer* swapped_ = nullptr;
  std::function<void(std::size_t, const torch::Tensor&)> on_store_;
};

}  // namespace hftrain
