// A communicator over a c10d process group that reduce-scatters and all-gathers flat tensors natively
// (`_reduce_scatter_base`, `_allgather_base`): NCCL's (comm_nccl.cpp), and in the tests an in-process fake
// group. Its collectives work on one device; a tensor elsewhere (the host numbers of all_reduce_scalar and
// all_gather_ints, say) travels through a copy on that device, copied back when the operation is waited for.
// Uneven reduce-scatter segments are padded to the largest (the backends want equal ones). Bytes are
// counted as the ring algorithms send them; failures name the operation, its purpose and the rank.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/collective_work.h"
#include "util/error.h"

namespace hftrain {

// Builds the communicator of the group of world ranks `ranks` (Comm::subgroup), this rank being member `index`: a
// process group of the backend's own over the job's store under the group's name (NCCL: comm_nccl.cpp).
using SubgroupMaker = std::function<std::unique_ptr<Comm>(const std::vector<int>& ranks, int index, const std::string& name)>;

template <class ProcessGroup>
class NativeCollectivesComm : public Comm {
 public:
  // `keep_alive` holds what the group needs for as long as it lives (the rendezvous store and its server);
  // `make_subgroup` builds groups of its ranks (null: subgroup() is refused by name).
  NativeCollectivesComm(c10::intrusive_ptr<ProcessGroup> group, int rank, int size, torch::Device device,
                        std::chrono::milliseconds timeout, std::string backend, std::shared_ptr<void> keep_alive = nullptr,
                        SubgroupMaker make_subgroup = nullptr)
      : keep_alive_(std::move(keep_alive)), group_(std::move(group)), rank_(rank), size_(size), device_(device),
        timeout_(timeout), backend_(std::move(backend)), make_subgroup_(std::move(make_subgroup)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return backend_; }

  std::unique_ptr<PendingOp> all_reduce_async(torch::Tensor t, ReduceOp op, const std::string& what) override {
    if (!here(t)) {
      auto staged = staged_copy(t);
      return std::make_unique<StagedOp>(all_reduce_async(staged, op, what), [t, staged]() mutable { t.copy_(staged); });
    }
    require_contiguous(t, "all_reduce", what);
    // The ring all-reduce: a reduce-scatter then an all-gather, each sending (N-1)/N of the buffer.
    count("all_reduce", 2 * t.nbytes() * static_cast<uint64_t>(size_ - 1) / static_cast<uint64_t>(size_));
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op == ReduceOp::kSum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
    o.timeout = timeout_;
    return launch([&] { return group_->allreduce(tensors, o); }, "all_reduce", what, t.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> reduce_scatter_async(torch::Tensor input, std::vector<int64_t> counts, torch::Tensor output,
                                                  const std::string& what) override {
    if (!here(input) || !here(output)) {
      auto staged_out = torch::empty(output.sizes(), output.options().device(device_));
      return std::make_unique<StagedOp>(reduce_scatter_async(staged_copy(input), std::move(counts), staged_out, what),
                                        [output, staged_out]() mutable { output.copy_(staged_out); });
    }
    require_contiguous(input, "reduce_scatter", what);
    require_contiguous(output, "reduce_scatter", what);
    check_segment_counts(counts, size_, rank_, input, output, what);
    const int64_t widest = *std::max_element(counts.begin(), counts.end());
    count("reduce_scatter", static_cast<uint64_t>(size_ - 1) * static_cast<uint64_t>(widest) * input.element_size());
    c10d::ReduceScatterOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    o.timeout = timeout_;
    auto in = input.view({-1});
    if (std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == widest; })) {
      auto out = output.view({-1});
      return launch([&] { return group_->_reduce_scatter_base(out, in, o); }, "reduce_scatter", what, input.nbytes(), nullptr);
    }
    auto padded = torch::zeros({widest * size_}, input.options());
    int64_t offset = 0;
    for (int j = 0; j < size_; ++j) {
      padded.narrow(0, j * widest, counts[j]).copy_(in.narrow(0, offset, counts[j]));
      offset += counts[j];
    }
    auto out = torch::empty({widest}, input.options());
    const int64_t mine = counts[rank_];
    auto finish = [output, out, mine]() mutable {
      torch::NoGradGuard no_grad;
      output.view({-1}).copy_(out.narrow(0, 0, mine));
    };
    return launch([&] { return group_->_reduce_scatter_base(out, padded, o); }, "reduce_scatter", what, padded.nbytes(), finish);
  }

  std::unique_ptr<PendingOp> all_gather_async(torch::Tensor input, torch::Tensor output, const std::string& what) override {
    if (!here(input) || !here(output)) {
      auto staged_out = torch::empty(output.sizes(), output.options().device(device_));
      return std::make_unique<StagedOp>(all_gather_async(staged_copy(input), staged_out, what),
                                        [output, staged_out]() mutable { output.copy_(staged_out); });
    }
    require_contiguous(input, "all_gather", what);
    require_contiguous(output, "all_gather", what);
    if (output.numel() != input.numel() * size_) throw RuntimeFailure("all_gather (" + what + "): output size mismatch");
    count("all_gather", static_cast<uint64_t>(size_ - 1) * input.nbytes());
    auto in = input.view({-1}), out = output.view({-1});
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    return launch([&] { return group_->_allgather_base(out, in, o); }, "all_gather", what, output.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> broadcast_async(torch::Tensor t, int root, const std::string& what) override {
    if (!here(t)) {
      auto staged = staged_copy(t);
      return std::make_unique<StagedOp>(broadcast_async(staged, root, what), [t, staged]() mutable { t.copy_(staged); });
    }
    require_contiguous(t, "broadcast", what);
    count("broadcast", rank_ == root ? t.nbytes() * static_cast<uint64_t>(size_ - 1) : 0);  // upper bound, as Gloo's
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    return launch([&] { return group_->broadcast(tensors, o); }, "broadcast", what, t.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> all_to_all_async(torch::Tensor input, torch::Tensor output, const std::string& what) override {
    if (!here(input) || !here(output)) {
      auto staged_out = torch::empty(output.sizes(), output.options().device(device_));
      return std::make_unique<StagedOp>(all_to_all_async(staged_copy(input), staged_out, what),
                                        [output, staged_out]() mutable { output.copy_(staged_out); });
    }
    require_contiguous(input, "all_to_all", what);
    require_contiguous(output, "all_to_all", what);
    count("all_to_all", check_equal_segments(input, output, size_, what));
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    auto in = input.view({-1}), out = output.view({-1});
    std::vector<int64_t> equal;  // empty split sizes: equal segments
    return launch([&] { return group_->alltoall_base(out, in, equal, equal, o); }, "all_to_all", what, input.nbytes(),
                  nullptr);
  }

  std::unique_ptr<PendingOp> all_to_all_v_async(torch::Tensor input, std::vector<int64_t> in_counts, torch::Tensor output,
                                                std::vector<int64_t> out_counts, const std::string& what) override {
    if (!here(input) || !here(output)) {
      auto staged_out = torch::empty(output.sizes(), output.options().device(device_));
      return std::make_unique<StagedOp>(
          all_to_all_v_async(staged_copy(input), std::move(in_counts), staged_out, std::move(out_counts), what),
          [output, staged_out]() mutable { output.copy_(staged_out); });
    }
    require_contiguous(input, "all_to_all_v", what);
    require_contiguous(output, "all_to_all_v", what);
    count("all_to_all_v", check_split_counts(input, in_counts, output, out_counts, size_, rank_, what));
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    auto in = input.view({-1}), out = output.view({-1});
    return launch([&] { return group_->alltoall_base(out, in, out_counts, in_counts, o); }, "all_to_all_v", what,
                  input.nbytes(), nullptr);
  }

  std::unique_ptr<Comm> subgroup(const std::vector<int>& ranks, const std::string& name) override {
    const int index = rank_in_group(ranks, rank_, size_, name);
    if (!make_subgroup_)
      throw RuntimeFailure("group " + name + ": this " + backend_ + " communicator cannot build groups of its ranks");
    try {
      return make_subgroup_(ranks, index, name);
    } catch (const RuntimeFailure&) {
      throw;
    } catch (const std::exception& e) {
      throw RuntimeFailure("group " + name + ": rank " + std::to_string(index) + " of " + std::to_string(ranks.size()) +
                           " could not form its " + backend_ + " group: " + short_error(e));
    }
  }

  // A tiny all-reduce: it honours the timeout and names the operation. Its result is read on the host, since
  // waiting on a GPU work item may only order the caller's stream after it, and a barrier must hold the host.
  void barrier(const std::string& what) override {
    auto t = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions o;
    o.timeout = timeout_;
    launch([&] { return group_->allreduce(tensors, o); }, "barrier", what, 0, nullptr)->wait();
    (void)t.item<float>();
  }

 private:
  bool here(const torch::Tensor& t) const { return t.defined() && t.device() == device_; }
  torch::Tensor staged_copy(const torch::Tensor& t) const { return t.to(device_).contiguous(); }

  void require_contiguous(const torch::Tensor& t, const std::string& op, const std::string& what) const {
    if (!t.defined() || !t.is_contiguous())
      throw RuntimeFailure(op + " (" + what + "): tensors must be defined and contiguous");
  }

  template <class Start>
  std::unique_ptr<PendingOp> launch(Start&& start, const std::string& op, const std::string& what, uint64_t bytes,
                                    std::function<void()> finish) {
    using WorkPtr = decltype(start());
    WorkPtr work;
    try {
      work = start();
    } catch (const std::exception& e) {
      throw RuntimeFailure("collective " + op + " of " + what + " on rank " + std::to_string(rank_) + " (" + backend_ +
                           ") could not start: " + short_error(e));
    }
    return std::make_unique<WorkPending<WorkPtr>>(std::move(work), op, what, bytes, rank_, timeout_, std::move(finish));
  }

  std::shared_ptr<void> keep_alive_;  // first member: destroyed last, after the group
  c10::intrusive_ptr<ProcessGroup> group_;
  int rank_, size_;
  torch::Device device_;
  std::chrono::milliseconds timeout_;
  std::string backend_;
  SubgroupMaker make_subgroup_;
};

}  // namespace hftrain
