// ZeroEngine: data parallelism over the ranks of a Comm, ZeRO stages 0, 1, 2 and 3.
//   stage 0  every rank holds everything; gradients are averaged with bucketed all-reduces (DDP).
//   stage 1  fp32 master weights and optimizer state exist only for this rank's 1/N partition of each
//            parameter group; gradients are reduce-scattered at the accumulation boundary (each rank
//            only needs its partition), the optimizer steps the partition, then the parameters are
//            all-gathered.
//   stage 2  as stage 1, and gradients too are kept only for the partition: each bucket is
//            reduce-scattered as soon as backward has filled it and then freed, on every micro-step
//            (as DeepSpeed does; gradient accumulation happens in the partition).
//   stage 3  as stage 2, and the parameters too exist only as this rank's partition: each gather unit of
//            the model (embeddings, a block, the head) has its own flat groups, whole only while a unit
//            that uses them runs (engine/param_coordinator.h); after the step only the shards change.
// The trainable parameters of each optimizer group live in one flat, padded buffer (the model's
// parameters become views of it; layout in engine/partition.h).
// Mixed precision (engine/precision.h): the flat parameter and gradient buffers are 16-bit and the
// optimizer updates separate fp32 master weights -- the whole group at stage 0, only this rank's
// partition at stages 1-2 -- then writes them back rounded to 16 bits and (stages 1-2) all-gathers the
// 16-bit partitions. At the step the 16-bit gradients of what this rank updates become a transient fp32
// copy, divided by the loss scale; the norm, clipping and the overflow verdict are computed on it. An
// overflow (inf/nan in any rank's gradients) skips the update on every rank and updates the loss scaler. Reductions are started from
// post-accumulation autograd hooks in a fixed bucket order, so they overlap the rest of backward; with
// stages 0 and 1 nothing is communicated during accumulation micro-steps. Clipping uses the global norm
// over all partitions; a non-finite norm is therefore the same verdict on every rank.
#pragma once

#include <deque>
#include <functional>
#include <optional>

#include "distributed/comm.h"
#include "engine/engine.h"
#include "engine/param_coordinator.h"
#include "engine/partition.h"
#include "engine/precision.h"
#include "offload/swapped_optimizer.h"

namespace torch::autograd {
struct Node;
}

namespace hftrain {

// Stage 3 sharded construction: a parameter's initial value as runs of its flat fp32 elements
// (begin, count), so that a rank reads only its partition (e.g. from the safetensors files).
using ValueReader = std::function<torch::Tensor(int64_t begin, int64_t count)>;
// Receives each parameter's initial value; returns true to keep the whole value in the model (a
// parameter this engine does not train, which stays whole).
using InitialValueVisitor = std::function<bool(const std::string& name, const ValueReader& read)>;

struct DataParallelOptions {
  int stage = 0;
  double max_grad_norm = 0;
  double bucket_cap_mb = 25;          // distributed.ddp_bucket_cap_mb
  bool skip_nonfinite_steps = false;  // skip the update when the global gradient norm is inf/nan
  bool report_memory = true;          // rank 0 prints every rank's memory and traffic after the first step
  MixedPrecision precision;           // fp32 by default; 16-bit parameters and gradients with fp32 masters
  // Stage 3: the trainable parameter names each gather unit of the model uses (resolve_gather_units),
  // the size under which a parameter stays whole on every rank, and the coordinator's budgets.
  std::vector<std::vector<std::string>> gather_units;
  int64_t persistence_threshold = 100000;  // zero.stage3_param_persistence_threshold
  CoordinatorLimits gather_limits;
  // zero.offload_optimizer device nvme (stages 1-3): the optimizer state -- with mixed precision the fp32
  // master weights too -- in swap files under nvme_offload->swap_dir (the engine adds this rank's
  // subdirectory). With nvme_offload->parameter_shards (zero.offload_param nvme, stage 3) the parameter
  // shards as well: each gather reads this rank's shard from the file.
  std::optional<SwapOptions> nvme_offload;
  // Stage 3, sharded construction (zero.Init): the model's parameters hold no memory yet; this hands
  // the engine each parameter's initial value in turn (Model::materialise_parameters, or the pretrained
  // files) and the engine reads only this rank's partition of each, so no rank holds the whole model.
  std::function<void(const InitialValueVisitor&)> initial_values;
};

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

class ZeroEngine : public Engine {
 public:
  // `groups`: the optimizer parameter groups over the model's trainable parameters; `model_order`
  // lists the trainable parameter names in the model's order (the backward order is its reverse).
  ZeroEngine(std::vector<ParamGroup> groups, const std::vector<std::string>& model_order,
                     const OptimizerFactory& build_optimizer, const DataParallelOptions& options, Comm& comm);
  ~ZeroEngine() override;

  void backward(const torch::Tensor& loss, bool is_last_micro_step) override;
  StepResult step(double lr) override;
  std::map<std::string, torch::Tensor> optimizer_state() const override;  // with the loss scaler's state
  void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) override;

  bool sharded() const override { return stage_ >= 1; }
  bool partitions_parameters() const override { return stage_ == 3; }
  GatherHooks* gather_hooks() override { return coordinator_.get(); }
  void gather_full_parameters() override;
  EngineShard export_shard() const override;
  const PartitionMap* partition_map() const override { return stage_ >= 1 ? &map_ : nullptr; }
  void import_shard(const std::map<std::string, torch::Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                    const std::string& source) override;
  EngineMemory memory() const override;
  std::string describe() const override;
  std::map<std::string, torch::Tensor> master_weights() override;
  StreamedWeights stream_master_weights() override;
  void load_master_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source) override;

  const PartitionMap& partition() const { return map_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  // Bytes this rank sent for the last step (since the step before it: the window's forward and backward
  // passes and the step; anything else run between steps, e.g. an evaluation, too), by operation.
  const std::map<std::string, uint64_t>& last_step_bytes() const { return last_step_bytes_; }

 private:
  struct Bucket {
    int group = 0;
    int64_t begin = 0, end = 0;  // range in the group's flat buffer
    std::vector<int> members;     // parameter indices in the group
    int pending = 0;              // members whose gradient has not arrived in this pass
    torch::Tensor staging;        // stage 2: the bucket's gradients for this micro-step
    torch::Tensor received;       // stages 1-2: this rank's reduced part (in the reduction dtype)
    torch::Tensor wire;           // the bucket converted to zero.reduce_dtype, when that differs
    std::unique_ptr<PendingOp> op;
  };

  void build_buckets(int64_t cap_bytes);
  void install_hooks();
  void on_gradient(int group, int index);
  void launch_ready();
  void launch(std::size_t k);
  void complete(std::size_t k);
  void finish_pass();
  void zero_gradients();
  void report_first_step();
  StepResult step_fp32(double lr);
  StepResult step_mixed(double lr);
  torch::Tensor own_flat_params(std::size_t g) const;  // the 16-bit range of group g the masters update
  void set_master_grads(const std::vector<torch::Tensor>& grads32);
  // This rank's fp32 master partition of group g (read from the swap file when the masters live there).
  torch::Tensor master_values(std::size_t g) const;
  // The fp32 masters of the whole group g, gathered from every rank (collective); the live masters
  // themselves when this rank holds them all (stage 0, one rank).
  torch::Tensor gathered_masters(std::size_t g);
  // Sets the first values.numel() elements of group g's master partition (the rest: as they were, or 0
  // when the masters live in the swap file) and, with mixed precision, its 16-bit copy.
  void store_master_values(std::size_t g, const torch::Tensor& values);
  void write_back_masters();
  void share_updated_parameters();
  void load_scaler_state(const std::map<std::string, torch::Tensor>& state, const std::string& source);
  std::string bucket_name(std::size_t k) const;

  Comm& comm_;
  int stage_;
  int rank_, world_;
  DataParallelOptions options_;
  PartitionMap map_;
  std::vector<std::vector<torch::Tensor>> params_;  // per group, the model's parameters (views of flat_params_)
  std::vector<torch::Tensor> flat_params_;          // per group, padded, in the parameter dtype
  std::vector<torch::Tensor> flat_grads_;           // stages 0-1: per group, padded (param.grad are views)
  // fp32 master weights per group: fp32 stages 1-2: this rank's partition of flat_params_ (a view);
  // mixed: a separate fp32 tensor of the whole group (stage 0) or of this rank's partition (stages 1-2).
  std::vector<torch::Tensor> master_;
  std::vector<std::vector<torch::Tensor>> master_views_;  // mixed stage 0: per-parameter views of master_
  std::vector<torch::Tensor> partition_grads_;      // stages 1-2: averaged gradients of the partition
  std::vector<torch::Tensor> shard16_;               // mixed stage 3: this rank's 16-bit partition (gather source)
  std::vector<int> group_pending_;                  // stage 3: parameters of each group still without a gradient
  std::unique_ptr<ParamCoordinator> coordinator_;   // stage 3
  std::unique_ptr<Optimizer> optimizer_;
  SwappedOptimizer* swapped_masters_ = nullptr;     // NVMe offload with mixed precision: where master_ lives
  bool swapped_shards_ = false;                     // stage 3 offload_param nvme: the gather sources are there too
  torch::ScalarType dtype_ = torch::kFloat;         // parameters and gradients
  torch::ScalarType reduce_dtype_ = torch::kFloat;  // what gradient reductions send
  bool mixed_ = false;
  LossScaler scaler_;

  std::vector<Bucket> buckets_;                     // in launch order
  std::vector<std::vector<std::size_t>> bucket_of_;  // [group][param index] -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  bool sync_ = false;
  std::size_t next_launch_ = 0;
  std::deque<std::size_t> in_flight_;
  int64_t transient_bytes_ = 0, transient_peak_ = 0;
  int64_t steps_ = 0;
  CommStats stats_at_window_start_;  // since the previous step (or construction): forwards count too
  std::map<std::string, uint64_t> last_step_bytes_;
};

}  // namespace hftrain
