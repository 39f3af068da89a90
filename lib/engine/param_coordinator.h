// ZeRO stage 3's partitioned-parameter coordinator: decides when each flat parameter group of the
// engine is whole. A group's full buffer normally holds no memory (its storage is released; the model's
// parameters stay views of it, so their shapes are intact); the coordinator all-gathers it from the
// ranks' shards just before a gather unit that uses it runs (Model's GatherHooks), starts the gathers
// of the next units early (prefetch, up to a budget of elements), and releases it when no running unit
// needs it: after the unit's forward, or in backward once every parameter of the group has received
// its gradient (the engine reports that). Backward finds the parameters again through an autograd node
// placed on each unit's output, which gathers the unit before its own backward runs. Persistent groups
// (parameters below the persistence threshold) stay whole all the time. Frozen groups (engine/frozen_partition.h)
// get no gradients: in backward the coordinator holds them while backward is inside a unit that uses them,
// and releases them when backward enters another unit (through its node, or its recomputation).
// The released-storage technique is the one PyTorch FSDP uses: autograd's saved tensors (e.g. a
// transposed weight) share the parameter's storage, so they see the re-gathered values in backward.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/comm.h"
#include "engine/engine.h"
#include "models/model.h"

namespace hftrain {

// Where a group's shard comes from when it is gathered, when it does not stay in memory (NVMe offload of
// the parameters): a fresh tensor with this rank's shard of group g.
using ShardReader = std::function<torch::Tensor(std::size_t group)>;

// (Their defaults are the spec's, given by EngineSettings.)
struct CoordinatorLimits {
  int64_t prefetch_elements = 0;  // zero.stage3_prefetch_bucket_size
  int64_t max_live_elements = 0;  // zero.stage3_max_live_parameters (bounds what prefetch keeps whole)
};

class ParamCoordinator : public GatherHooks, public ShardedParameters {
 public:
  // `full[g]`: group g's whole flat buffer (world * shard numel elements); `shard[g]`: this rank's part,
  // the all-gather's source (or, with `read_shard`, read for each gather and dropped after it); `units[u]`:
  // the groups unit u uses.
  ParamCoordinator(Comm& comm, std::vector<torch::Tensor> full, std::vector<torch::Tensor> shard,
                   std::vector<bool> persistent, std::vector<std::vector<std::size_t>> units, CoordinatorLimits limits,
                   ShardReader read_shard = nullptr);
  ~ParamCoordinator() override;
  // Adds groups of frozen parameters (whole now; released here), used by the units `unit_groups[u]` names
  // (indices into `full`). Their shards stay in memory (never read through `read_shard`).
  void add_frozen(const std::vector<torch::Tensor>& full, const std::vector<torch::Tensor>& shard,
                  const std::vector<std::vector<std::size_t>>& unit_groups);

  void before_unit(std::size_t unit) override;
  torch::Tensor after_unit(std::size_t unit, torch::Tensor output) override;

  // Backward reached unit `unit` (called by the autograd node on its output).
  void before_unit_backward(std::size_t unit);
  // Every parameter of group `group` has its gradient for this backward pass: release it unless in use.
  void gradients_done(std::size_t group);
  // A backward pass starts / has finished: at the end every non-persistent group is released.
  void begin_backward();
  void end_backward();
  // Re-gathers the persistent groups (after the optimizer updated the shards).
  void refresh_persistent();
  // Makes every group whole and keeps it so (end of training: the model is used without the engine).
  void gather_all();
  // The engine's sharded-parameter access (engine/engine.h) is this coordinator.
  GatherHooks* gather_hooks() override { return this; }
  void gather_full_parameters() override { gather_all(); }
  // Releases every non-persistent group (waits for gathers in flight first).
  void release_all();

  int64_t live_elements() const { return live_elements_; }
  int64_t live_peak_elements() const { return live_peak_; }
  // The same in bytes (groups of several dtypes: a quantised base's uint8 / int8 codes beside float tensors).
  int64_t live_peak_bytes() const { return live_peak_bytes_; }
  std::size_t unit_count() const { return units_.size(); }
  bool persistent(std::size_t group) const { return groups_[group].persistent; }
  std::size_t persistent_count() const;

 private:
  enum class State { kReleased, kInFlight, kLive };
  struct Group {
    torch::Tensor full, shard;
    torch::Tensor source;  // the shard a gather in flight reads (read_shard's tensor lives until it completes)
    bool persistent = false;
    bool frozen = false;   // no gradients: held in backward while backward is inside a unit that uses it
    State state = State::kReleased;
    int uses = 0;          // running units (forward or recomputation) that need it
    bool held = false;     // backward needs it until its gradients are done
    std::unique_ptr<PendingOp> op;
  };

  void start_gather(std::size_t g);
  void gather_into_full(std::size_t g);  // starts the all-gather of the shard into the (allocated) full buffer
  void finish_gather(Group& group);
  void wait_live(std::size_t g);
  void release(std::size_t g);
  void release_if_unused(std::size_t g);
  void prefetch_from(std::size_t unit, int direction);
  // Backward has moved on to `unit`: the frozen groups of the unit it left are no longer held.
  void enter_backward_unit(std::size_t unit);

  Comm& comm_;
  std::vector<Group> groups_;
  std::vector<std::vector<std::size_t>> units_;
  CoordinatorLimits limits_;
  ShardReader read_shard_;
  bool in_backward_ = false;
  bool keep_all_ = false;
  static constexpr std::size_t kNoUnit = static_cast<std::size_t>(-1);
  std::size_t backward_unit_ = kNoUnit;  // the unit backward is inside (its node ran, or it was recomputed)
  int64_t live_elements_ = 0, live_peak_ = 0;
  int64_t live_bytes_ = 0, live_peak_bytes_ = 0;
  void count_live(const torch::Tensor& full, int sign);  // a group's buffer gathered (+1) or released (-1)
};

}  // namespace hftrain
