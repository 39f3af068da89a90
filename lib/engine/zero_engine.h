// ZeroEngine: data parallelism over the ranks of a Comm, ZeRO stages 0, 1, 2 and 3, composed of one
// part per axis: FlatParameters (engine/flat_parameters.h: the flat buffers, the model's parameters as
// views, ZeRO-3's unit layout), GradientSync (engine/gradient_sync.h: how gradients are averaged),
// MasterStore (engine/master_store.h: fp32 masters in memory or in the swap file), the ParamCoordinator
// (engine/param_coordinator.h: ZeRO-3 gather / release / prefetch) and the update rule
// (engine/zero_step.cpp: norm, clipping, overflow, optimizer, sharing the updated parameters). The stage
// is read once, in the constructor, to choose each part; the rest asks the parts.
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

#include <optional>

#include "distributed/comm.h"
#include "engine/engine.h"
#include "engine/engine_settings.h"
#include "engine/flat_parameters.h"
#include "engine/frozen_partition.h"
#include "engine/gradient_sync.h"
#include "engine/master_store.h"
#include "engine/param_coordinator.h"
#include "engine/parameter_publisher.h"
#include "engine/partition.h"
#include "engine/precision.h"
#include "offload/swapped_optimizer.h"

namespace hftrain {

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

class ZeroEngine : public Engine {
 public:
  // `groups`: the optimizer parameter groups over the model's trainable parameters; `model_order`
  // lists the trainable parameter names in the model's order (the backward order is its reverse).
  ZeroEngine(std::vector<ParamGroup> groups, const std::vector<std::string>& model_order,
             const OptimizerFactory& build_optimizer, const EngineSettings& options, Comm& comm);
  ~ZeroEngine() override;

  void backward(const torch::Tensor& loss, bool is_last_micro_step) override;
  StepResult step(double lr) override;
  std::map<std::string, torch::Tensor> optimizer_state() const override;  // with the loss scaler's state
  void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) override;

  bool sharded() const override { return shards_optimizer_; }
  ShardedParameters* sharded_parameters() const override { return coordinator_.get(); }
  bool holds_every_parameter() const override { return !options_.expert_data_group; }
  bool keeps_model_in_shards() const override { return partitions_params_ && !options_.gather_16bit_weights_on_model_save; }
  EngineShard export_shard() const override;
  const PartitionMap* partition_map() const override { return shards_optimizer_ ? &map_ : nullptr; }
  void import_shard(const std::map<std::string, torch::Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                    const std::string& source) override;
  EngineMemory memory() const override;
  std::string describe() const override;
  nlohmann::json layout() const override { return layout_of(stage_, precision_name(dtype_)); }
  std::map<std::string, torch::Tensor> master_weights() override;
  StreamedWeights stream_master_weights() override;
  void load_master_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source) override;

  const PartitionMap& partition() const { return map_; }
  int64_t bucket_count() const { return static_cast<int64_t>(grads_->bucket_count()); }
  // Bytes this rank sent for the last step (since the step before it: the window's forward and backward
  // passes and the step; anything else run between steps, e.g. an evaluation, too), by operation.
  const std::map<std::string, uint64_t>& last_step_bytes() const { return last_step_bytes_; }

 private:
  // Where the fp32 masters live, chosen once by the constructor.
  enum class MasterHome {
    kParameters,  // fp32 stages 0-2: the parameters themselves (stages 1-2: views of this rank's partition)
    kDevice,      // tensors of their own beside the parameters: mixed precision's fp32 copy, stage 3's fp32 shards
    kHost,        // offload_optimizer cpu: this rank's partition in (pinned) host memory
    kSwapFile,    // NVMe offload of masters that are not the parameters: in this rank's swap file
  };
  // Construction (zero_engine.cpp): the settings checked and the masters' home chosen, the flat buffers and
  // the masters, the optimizer over them, the stage-3 coordinator.
  void choose_master_home();
  // Expert data parallelism (stages 1-2, options_.expert_data_group): the groups split by member, and each flat
  // group's communicator chosen (group_comms_).
  std::vector<std::vector<int>> hold_experts_apart(std::vector<ParamGroup>& groups);
  void choose_group_comms();
  bool holds(std::size_t g) const { return group_comms_[g] != nullptr; }
  void adopt_flat_parameters(std::vector<ParamGroup>& groups, const std::vector<bool>& persistent);
  void adopt_masters(std::size_t g, const torch::Tensor& values32, const torch::Tensor& flat);
  torch::Tensor masters_from(const torch::Tensor& values32, const torch::Tensor& flat, const torch::Tensor& partition) const;
  std::vector<ParamGroup> optimizer_groups(const std::vector<ParamGroup>& model_groups);
  void build_optimizer(const std::vector<ParamGroup>& model_groups, const OptimizerFactory& build);
  void build_coordinator(const std::vector<bool>& persistent, const std::vector<std::vector<std::size_t>>& unit_groups);
  void partition_frozen_parameters();  // stage 3: the frozen parameters join the coordinator
  // The update rule (zero_step.cpp): one step for every stage and precision, norm -> overflow verdict -> clip ->
  // update -> publish, through the parts choose_step_parts() picks once, after the optimizer is built.
  struct StepGradients {
    std::vector<torch::Tensor> tensors;  // what the norm measures and clipping scales: fp32, or the 16-bit ones
    double divisor = 1.0;                // 16-bit gradients still carry the loss scale
    bool fused = false;  // 16-bit, unscaled and clipped by the optimizer's own pass (StepScaling)
  };
  // On the gradients' device: read to the host only by mixed precision's overflow verdict and by logging.
  struct GlobalNorm {
    torch::Tensor total;  // float32, 0-dim: the logged grad_norm and the clip coefficient's input (undefined: no gradients)
    torch::Tensor sum;    // double, one element: the squared norms summed (over the ranks' partitions), when summed
    bool vote = false;    // replicated 16-bit gradients on several ranks: the ranks vote on the overflow verdict
  };
  StepResult update_parameters(double lr);
  void choose_step_parts();
  StepGradients parameter_grads() const;
  StepGradients partition_grads() const;
  StepGradients fp32_copies(double scale, bool on_host);
  StepGradients fused_grads(double scale);
  GlobalNorm summed_norm(const StepGradients& grads, bool over_partitions) const;
  void set_master_grads(const std::vector<torch::Tensor>& grads32);
  void step_masters(double lr, const std::vector<torch::Tensor>& grads32);  // attach, step, detach, write back
  void write_back_masters();
  void share_updated_parameters() { publisher_->publish(); }
  torch::Tensor own_flat_params(std::size_t g) const { return own_params_[g]; }
  // State (zero_engine_state.cpp) and reports (zero_engine_report.cpp).
  void load_scaler_state(const std::map<std::string, torch::Tensor>& state, const std::string& source);
  void report_first_step();
  // Whether the fp32 masters are tensors of their own (mixed precision, stage 3, host offload), not the parameters.
  bool masters_separate() const { return master_home_ != MasterHome::kParameters; }
  // Whether the values the parameters are refreshed from are the masters' copies (16-bit, or on the device beside
  // host masters) rather than the masters themselves.
  bool params_copy_masters() const { return mixed_ || host_masters_; }
  // Stage 3: whether the gather sources are shard16_ (copies of the masters) rather than the masters.
  bool device_shards_separate() const { return partitions_params_ && params_copy_masters(); }
  // Where the masters and the optimizer state live.
  torch::Device optimizer_device() const { return master_home_ == MasterHome::kHost ? torch::Device(torch::kCPU) : options_.device; }

  Comm& comm_;
  int stage_;  // reported only; the parts below were chosen from it
  int rank_, world_;
  EngineSettings options_;
  bool shards_optimizer_ = false;  // stages 1-3: masters and optimizer state only for this rank's partition
  bool partitions_params_ = false;  // stage 3: parameters too exist only as this rank's partition
  bool mixed_ = false;             // 16-bit parameters and gradients, separate fp32 masters
  bool swapped_shards_ = false;    // stage 3 offload_param nvme: the gather sources live in the swap file
  bool host_masters_ = false;      // offload_optimizer cpu: masters, optimizer state and a gradient copy on the host
  MasterHome master_home_ = MasterHome::kParameters;
  std::vector<torch::Tensor> host_grads_;  // host offload: each group's fp32 partition gradients
  torch::ScalarType dtype_ = torch::kFloat;         // parameters and gradients
  torch::ScalarType reduce_dtype_ = torch::kFloat;  // what gradient reductions send
  PartitionMap map_;
  std::vector<Comm*> group_comms_;  // per flat group, its holders' communicator; null where this rank does not hold it
  FlatParameters flat_;
  std::unique_ptr<GradientSync> grads_;
  MasterStore masters_;
  std::vector<std::vector<torch::Tensor>> master_views_;  // mixed, whole groups: per-parameter views of the masters
  std::vector<torch::Tensor> shard16_;  // stage 3 with copies of the masters: this rank's partition (gather source)
  std::unique_ptr<ParamCoordinator> coordinator_;  // stage 3
  FrozenGroups frozen_;                             // stage 3: the frozen parameters' shards
  std::unique_ptr<Optimizer> optimizer_;
  LossScaler scaler_;
  // Per group, the range the masters update: the partition of the flat buffer (stages 1-2), the whole buffer
  // (stage 0), stage 3's 16-bit shard (when the shards are copies of the masters).
  std::vector<torch::Tensor> own_params_;
  // The step's parts (choose_step_parts).
  std::function<StepGradients(double scale)> gradients_for_step_;
  std::function<GlobalNorm(const StepGradients&)> global_norm_;
  std::function<void(const GlobalNorm&, double scale, StepResult&)> verdict_;
  std::function<void(double lr, const StepGradients&, double clip, double scale)> update_;
  std::unique_ptr<ParameterPublisher> publisher_;
  int64_t steps_ = 0;
  CommStats stats_at_window_start_;  // since the previous step (or construction): forwards count too
  std::map<std::string, uint64_t> last_step_bytes_;
};

}  // namespace hftrain
