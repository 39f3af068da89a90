// DataParallelEngine: data parallelism over the ranks of a Comm, ZeRO stages 0, 1 and 2.
//   stage 0  every rank holds everything; gradients are averaged with bucketed all-reduces (DDP).
//   stage 1  fp32 master weights and optimizer state exist only for this rank's 1/N partition of each
//            parameter group; gradients are reduce-scattered at the accumulation boundary (each rank
//            only needs its partition), the optimizer steps the partition, then the parameters are
//            all-gathered.
//   stage 2  as stage 1, and gradients too are kept only for the partition: each bucket is
//            reduce-scattered as soon as backward has filled it and then freed, on every micro-step
//            (as DeepSpeed does; gradient accumulation happens in the partition).
// The trainable parameters of each optimizer group live in one flat, padded fp32 buffer (the model's
// parameters become views of it; layout in engine/partition.h). Reductions are started from
// post-accumulation autograd hooks in a fixed bucket order, so they overlap the rest of backward; with
// stages 0 and 1 nothing is communicated during accumulation micro-steps. Clipping uses the global norm
// over all partitions; a non-finite norm is therefore the same verdict on every rank.
#pragma once

#include <deque>
#include <functional>

#include "dist/comm.h"
#include "engine/engine.h"
#include "engine/partition.h"

namespace torch::autograd {
struct Node;
}

namespace hftrain {

struct DataParallelOptions {
  int stage = 0;
  double max_grad_norm = 0;
  double bucket_cap_mb = 25;          // distributed.ddp_bucket_cap_mb
  bool skip_nonfinite_steps = false;  // skip the update when the global gradient norm is inf/nan
  bool report_memory = true;          // rank 0 prints every rank's memory and traffic after the first step
};

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

class DataParallelEngine : public Engine {
 public:
  // `groups`: the optimizer parameter groups over the model's trainable parameters; `model_order`
  // lists the trainable parameter names in the model's order (the backward order is its reverse).
  DataParallelEngine(std::vector<ParamGroup> groups, const std::vector<std::string>& model_order,
                     const OptimizerFactory& build_optimizer, const DataParallelOptions& options, Comm& comm);
  ~DataParallelEngine() override;

  void backward(const torch::Tensor& loss, bool is_last_micro_step) override;
  StepResult step(double lr) override;
  std::map<std::string, torch::Tensor> optimizer_state() const override { return optimizer_->state(); }
  void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) override { optimizer_->load_state(state); }

  bool sharded() const override { return stage_ >= 1; }
  EngineShard export_shard() const override;
  void import_shard(const std::map<std::string, torch::Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                    const std::string& source) override;
  EngineMemory memory() const override;
  std::string describe() const override;

  const PartitionMap& partition() const { return map_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  // Bytes this rank sent during the last step (backward passes of the window + step), by operation.
  const std::map<std::string, uint64_t>& last_step_bytes() const { return last_step_bytes_; }

 private:
  struct Bucket {
    int group = 0;
    int64_t begin = 0, end = 0;  // range in the group's flat buffer
    std::vector<int> members;     // parameter indices in the group
    int pending = 0;              // members whose gradient has not arrived in this pass
    torch::Tensor staging;        // stage 2: the bucket's gradients for this micro-step
    torch::Tensor received;       // stages 1-2: this rank's reduced part
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
  std::string bucket_name(std::size_t k) const;

  Comm& comm_;
  int stage_;
  int rank_, world_;
  DataParallelOptions options_;
  PartitionMap map_;
  std::vector<std::vector<torch::Tensor>> params_;  // per group, the model's parameters (views of flat_params_)
  std::vector<torch::Tensor> flat_params_;          // per group, padded
  std::vector<torch::Tensor> flat_grads_;           // stages 0-1: per group, padded (param.grad are views)
  std::vector<torch::Tensor> master_;               // stages 1-2: this rank's partition of flat_params_
  std::vector<torch::Tensor> partition_grads_;      // stages 1-2: averaged gradients of the partition
  std::unique_ptr<Optimizer> optimizer_;

  std::vector<Bucket> buckets_;                     // in launch order
  std::vector<std::vector<std::size_t>> bucket_of_;  // [group][param index] -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  bool sync_ = false;
  std::size_t next_launch_ = 0;
  std::deque<std::size_t> in_flight_;
  int64_t transient_bytes_ = 0, transient_peak_ = 0;
  int64_t steps_ = 0;
  CommStats stats_at_window_start_;
  bool window_open_ = false;
  std::map<std::string, uint64_t> last_step_bytes_;
};

}  // namespace hftrain
