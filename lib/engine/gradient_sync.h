// GradientSync: the gradient-synchronisation axis of the ZeRO engine. It owns the gradient buffers and
// averages the gradients over the ranks with bucketed collectives started from autograd hooks, so they
// overlap the rest of backward. Three ways to reduce, chosen by the engine from the ZeRO stage:
//   kAllReduce                   stage 0 (DDP): every rank keeps every averaged gradient; reduced only at
//                                the accumulation boundary, accumulated locally before it.
//   kReduceScatterAtBoundary     stage 1: full-size gradients accumulate locally; at the boundary each
//                                bucket is reduce-scattered so a rank receives only its partition.
//   kReduceScatterEveryMicroStep stages 2-3: no full-size gradient is kept: each bucket is staged and
//                                reduce-scattered as soon as backward fills it, on every micro-step, and
//                                the partition accumulates (as DeepSpeed does). At most two buckets in flight.
// Buckets are cut from the end of each flat group (the order backward produces gradients), at most
// ddp_bucket_cap_mb each, and launched in a fixed order so every rank issues the same collectives.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "engine/partition.h"
#include "util/torch_compat.h"

namespace torch::autograd {
struct Node;
}

namespace hftrain {

enum class GradientReduction { kAllReduce, kReduceScatterAtBoundary, kReduceScatterEveryMicroStep };

class GradientSync {
 public:
  // `params[g][i]`: the model's parameters of flat group g (views of the flat parameter buffer); their
  // .grad become views of the gradient buffer where the mode keeps full-size gradients. Every buffer is
  // on `device` (the parameters'). Group g is reduced over `group_comms[g]` (its holders': the world's, or an
  // expert-data-parallel group's) and divided by the world size of `comm` (each holder's gradient already sums
  // the rows of its expert group); a null entry is a group this rank does not hold (no buffers, no collectives).
  // Empty `group_comms`: every group over `comm`.
  GradientSync(Comm& comm, const PartitionMap& map, std::vector<std::vector<torch::Tensor>> params, GradientReduction mode,
               torch::Device device, torch::ScalarType dtype, torch::ScalarType reduce_dtype, double bucket_cap_mb,
               std::vector<Comm*> group_comms = {});
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Called once every parameter of flat group g has its gradient in a synchronising pass (ZeRO-3 releases
  // the gathered group then).
  void on_group_done(std::function<void(std::size_t group)> callback) { group_done_ = std::move(callback); }

  // Runs one backward pass of `loss` (already scaled) with the hooks armed; reduces when the mode says this
  // pass synchronises (every pass for kReduceScatterEveryMicroStep, the last micro-step otherwise).
  void backward(const torch::Tensor& loss, bool is_last_micro_step);

  // The averaged gradients this rank updates, per flat group: the whole padded group (kAllReduce) or this
  // rank's partition. Valid after the window's last backward.
  const std::vector<torch::Tensor>& step_grads() const { return step_grads_; }
  // The full-size gradient buffers (kAllReduce, kReduceScatterAtBoundary), else empty.
  const std::vector<torch::Tensor>& flat_grads() const { return flat_grads_; }
  void zero();

  std::size_t bucket_count() const { return buckets_.size(); }
  int64_t resident_bytes() const;  // the gradient buffers kept between steps
  int64_t transient_peak() const { return transient_peak_; }
  // Counts `extra` bytes held at the step on top of the buckets' (fp32 gradient copies) in the peak.
  void note_transient(int64_t extra) { transient_peak_ = std::max(transient_peak_, transient_bytes_ + extra); }

 private:
  struct Bucket {
    int group = 0;
    int64_t begin = 0, end = 0;  // range in the group's flat buffer
    std::vector<int> members;     // parameter indices in the group
    int pending = 0;              // members whose gradient has not arrived in this pass
    torch::Tensor staging;        // kReduceScatterEveryMicroStep: the bucket's gradients for this micro-step
    torch::Tensor received;       // reduce-scatter: this rank's reduced part (in the reduction dtype)
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
  std::string bucket_name(std::size_t k) const;
  bool keeps_full_grads() const { return mode_ != GradientReduction::kReduceScatterEveryMicroStep; }
  Comm* comm_of(std::size_t g) const { return group_comms_[g]; }

  Comm& comm_;
  const PartitionMap& map_;
  std::vector<std::vector<torch::Tensor>> params_;
  GradientReduction mode_;
  torch::Device device_;
  torch::ScalarType dtype_, reduce_dtype_;
  torch::TensorOptions on_device(torch::ScalarType dtype) const { return torch::TensorOptions().dtype(dtype).device(device_); }
  int rank_, world_;
  std::vector<Comm*> group_comms_;              // per group; null: not held here
  std::vector<torch::Tensor> flat_grads_;       // full-size modes: per group, padded (param.grad are views)
  std::vector<torch::Tensor> partition_grads_;  // reduce-scatter modes: the averaged gradients of the partition
  std::vector<torch::Tensor> step_grads_;
  std::function<void(std::size_t)> group_done_;
  std::vector<int> group_pending_;

  std::vector<Bucket> buckets_;                      // in launch order
  std::vector<std::vector<std::size_t>> bucket_of_;  // [group][param index] -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  bool sync_ = false;
  std::size_t next_launch_ = 0;
  std::deque<std::size_t> in_flight_;
  int64_t transient_bytes_ = 0, transient_peak_ = 0;
};

}  // namespace hftrain
