// The Gloo communicator: our rendezvous (rendezvous.h, store.h) + c10d::ProcessGroupGloo, with fallbacks
// for the collectives Gloo lacks in LibTorch 1.13 and byte counters (see comm.h); device tensors travel
// through host copies (collective_work.h StagedOp).
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdio>
#include <cstdlib>

#include "distributed/collective_work.h"
#include "distributed/comm.h"
#include "distributed/env.h"
#include "distributed/rendezvous.h"
#include "util/error.h"

namespace hftrain {
namespace {

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Gloo in LibTorch 1.13 refuses bfloat16. Data movement (all-to-all, all-gather, broadcast) is dtype
// blind, so a bf16 tensor travels as the float16 view of its bits (same size; Gloo copies them unchanged); sums are then taken locally in fp32.
bool gloo_lacks(const torch::Tensor& t) { return t.scalar_type() == torch::kBFloat16; }
torch::Tensor as_gloo_bits(const torch::Tensor& t) { return gloo_lacks(t) ? t.view(torch::kHalf) : t; }

// Sum of the `size` consecutive segments of `received` in rank order into `output` (16-bit inputs are
// accumulated in fp32 and rounded once).
void sum_segments(const torch::Tensor& received, int64_t size, int64_t n, torch::Tensor& output) {
  auto parts = received.view({size, n});
  const bool widen = parts.scalar_type() == torch::kBFloat16 || parts.scalar_type() == torch::kHalf;
  auto acc = widen ? parts[0].to(torch::kFloat) : parts[0].clone();
  for (int64_t r = 1; r < size; ++r) acc.add_(parts[r]);
  output.copy_(acc);
}

bool on_device(const torch::Tensor& t) { return t.defined() && !t.device().is_cpu(); }
torch::Tensor host_copy(const torch::Tensor& t) { return t.to(torch::kCPU).contiguous(); }
torch::Tensor host_like(const torch::Tensor& t) { return torch::empty(t.sizes(), t.options().device(torch::kCPU)); }

void require_cpu_contiguous(const torch::Tensor& t, const std::string& op, const std::string& what) {
  if (!t.defined() || !t.is_contiguous() || !t.device().is_cpu())
    throw RuntimeFailure(op + " (" + what + "): tensors must be defined, contiguous and on the CPU");
}

class GlooComm : public Comm {
 public:
  GlooComm(const DistEnv& env, const RendezvousOptions& rendezvous_options)
      : rank_(env.rank), size_(env.world_size), timeout_(rendezvous_options.store_timeout) {
    const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
    Rendezvous r = rendezvous(env, rendezvous_options);
    server_ = r.server;
    store_ = r.store;
    try {
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      if (ifname && *ifname)
        devices_.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(env.master_addr))
        devices_.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        devices_.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      pg_ = make_group("hftrain/world");
    } catch (const std::exception& e) {
      throw RuntimeFailure("rendezvous: rank " + std::to_string(env.rank) + " could not connect to the other " +
                           std::to_string(env.world_size - 1) + " worker(s) through " + where + ": " + short_error(e));
    }
  }

  // A group of `parent`'s ranks over the same store (its keys under the group's name) and devices.
  GlooComm(const GlooComm& parent, int rank, int size, const std::string& name)
      : rank_(rank), size_(size), timeout_(parent.timeout_), server_(parent.server_), store_(parent.store_),
        devices_(parent.devices_) {
    try {
      pg_ = make_group("hftrain/group/" + name);
    } catch (const std::exception& e) {
      throw RuntimeFailure("group " + name + ": rank " + std::to_string(rank) + " of " + std::to_string(size) +
                           " could not connect to the other members: " + short_error(e));
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "gloo"; }

  // Gloo moves host memory only: tensors on a device (a GPU without NCCL, or the lazy stand-in) travel
  // through host copies, which the operation's wait() copies back.
  std::unique_ptr<PendingOp> all_reduce_async(torch::Tensor t, ReduceOp op, const std::string& what) override {
    if (on_device(t)) {
      auto host = host_copy(t);
      return std::make_unique<StagedOp>(all_reduce_async(host, op, what), [t, host]() mutable { t.copy_(host); });
    }
    require_cpu_contiguous(t, "all_reduce", what);
    if (gloo_lacks(t)) return all_reduce_by_gather(t, op, what);
    const uint64_t bytes = t.nbytes();
    // Gloo's ring all-reduce: a reduce-scatter then an all-gather, each sending (N-1)/N of the buffer.
    const uint64_t sent = 2 * bytes * static_cast<uint64_t>(size_ - 1) / static_cast<uint64_t>(size_);
    count("all_reduce", sent);
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op == ReduceOp::kSum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
    o.timeout = timeout_;
    return launch([&] { return pg_->allreduce(tensors, o); }, "all_reduce", what, bytes, nullptr);
  }

  std::unique_ptr<PendingOp> reduce_scatter_async(torch::Tensor input, std::vector<int64_t> counts, torch::Tensor output,
                                                  const std::string& what) override {
    if (on_device(input) || on_device(output)) {
      auto host_out = host_like(output);
      return std::make_unique<StagedOp>(reduce_scatter_async(host_copy(input), std::move(counts), host_out, what),
                                        [output, host_out]() mutable { output.copy_(host_out); });
    }
    require_cpu_contiguous(input, "reduce_scatter", what);
    require_cpu_contiguous(output, "reduce_scatter", what);
    const int64_t total = check_segment_counts(counts, size_, rank_, input, output, what);
    // Fallback: all-to-all-v sends segment j to rank j; rank r receives its segment from every rank and
    // sums them in rank order.
    const int64_t mine = counts[rank_];
    auto received = torch::empty({mine * size_}, input.options());
    std::vector<int64_t> in_counts = counts, out_counts(static_cast<std::size_t>(size_), mine);
    count("reduce_scatter", static_cast<uint64_t>(total - mine) * input.element_size());
    auto finish = [received, output, mine, size = size_]() mutable {
      torch::NoGradGuard no_grad;
      if (mine > 0) sum_segments(received, size, mine, output);
    };
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    auto received_bits = as_gloo_bits(received), input_bits = as_gloo_bits(input);
    return launch([&] { return pg_->alltoall_base(received_bits, input_bits, out_counts, in_counts, o); }, "reduce_scatter",
                  what, input.nbytes(), finish);
  }

  std::unique_ptr<PendingOp> all_gather_async(torch::Tensor input, torch::Tensor output, const std::string& what) override {
    if (on_device(input) || on_device(output)) {
      auto host_out = host_like(output);
      return std::make_unique<StagedOp>(all_gather_async(host_copy(input), host_out, what),
                                        [output, host_out]() mutable { output.copy_(host_out); });
    }
    require_cpu_contiguous(input, "all_gather", what);
    require_cpu_contiguous(output, "all_gather", what);
    const int64_t n = input.numel();
    if (output.numel() != n * size_) throw RuntimeFailure("all_gather (" + what + "): output size mismatch");
    count("all_gather", static_cast<uint64_t>(size_ - 1) * input.nbytes());
    // Fallback for _allgather_base: the list form, whose outputs are views of the flat output.
    std::vector<std::vector<at::Tensor>> outputs(1);
    auto flat = as_gloo_bits(output.view({-1}));
    for (int r = 0; r < size_; ++r) outputs[0].push_back(flat.narrow(0, r * n, n));
    std::vector<at::Tensor> inputs{as_gloo_bits(input.view({-1}))};
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    return launch([&] { return pg_->allgather(outputs, inputs, o); }, "all_gather", what, output.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> broadcast_async(torch::Tensor t, int root, const std::string& what) override {
    if (on_device(t)) {
      auto host = host_copy(t);
      return std::make_unique<StagedOp>(broadcast_async(host, root, what), [t, host]() mutable { t.copy_(host); });
    }
    require_cpu_contiguous(t, "broadcast", what);
    // Upper bound: the root sends the buffer once to every other rank.
    count("broadcast", rank_ == root ? t.nbytes() * static_cast<uint64_t>(size_ - 1) : 0);
    std::vector<at::Tensor> tensors{as_gloo_bits(t)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    return launch([&] { return pg_->broadcast(tensors, o); }, "broadcast", what, t.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> all_to_all_async(torch::Tensor input, torch::Tensor output, const std::string& what) override {
    if (on_device(input) || on_device(output)) {
      auto host_out = host_like(output);
      return std::make_unique<StagedOp>(all_to_all_async(host_copy(input), host_out, what),
                                        [output, host_out]() mutable { output.copy_(host_out); });
    }
    require_cpu_contiguous(input, "all_to_all", what);
    require_cpu_contiguous(output, "all_to_all", what);
    count("all_to_all", check_equal_segments(input, output, size_, what));
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    auto out_bits = as_gloo_bits(output.view({-1})), in_bits = as_gloo_bits(input.view({-1}));
    std::vector<int64_t> equal;  // empty split sizes: equal segments
    return launch([&] { return pg_->alltoall_base(out_bits, in_bits, equal, equal, o); }, "all_to_all", what,
                  input.nbytes(), nullptr);
  }

  std::unique_ptr<PendingOp> all_to_all_v_async(torch::Tensor input, std::vector<int64_t> in_counts, torch::Tensor output,
                                                std::vector<int64_t> out_counts, const std::string& what) override {
    if (on_device(input) || on_device(output)) {
      auto host_out = host_like(output);
      return std::make_unique<StagedOp>(
          all_to_all_v_async(host_copy(input), std::move(in_counts), host_out, std::move(out_counts), what),
          [output, host_out]() mutable { output.copy_(host_out); });
    }
    require_cpu_contiguous(input, "all_to_all_v", what);
    require_cpu_contiguous(output, "all_to_all_v", what);
    count("all_to_all_v", check_split_counts(input, in_counts, output, out_counts, size_, rank_, what));
    c10d::AllToAllOptions o;
    o.timeout = timeout_;
    auto out_bits = as_gloo_bits(output.view({-1})), in_bits = as_gloo_bits(input.view({-1}));
    return launch([&] { return pg_->alltoall_base(out_bits, in_bits, out_counts, in_counts, o); }, "all_to_all_v", what,
                  input.nbytes(), nullptr);
  }

  std::unique_ptr<Comm> subgroup(const std::vector<int>& ranks, const std::string& name) override {
    const int index = rank_in_group(ranks, rank_, size_, name);
    return std::make_unique<GlooComm>(*this, index, static_cast<int>(ranks.size()), name);
  }

  void barrier(const std::string& what) override {
    // A tiny all-reduce: unlike Gloo's barrier it honours the timeout and names the operation.
    auto t = torch::zeros({1}, torch::kFloat32);
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions o;
    o.timeout = timeout_;
    launch([&] { return pg_->allreduce(tensors, o); }, "barrier", what, 0, nullptr)->wait();
  }

 private:
  // bf16 all-reduce (sum): every rank gathers every rank's tensor and sums them in rank order in fp32,
  // so every rank gets bitwise the same result; a rank sends (N-1) x the tensor.
  std::unique_ptr<PendingOp> all_reduce_by_gather(torch::Tensor t, ReduceOp op, const std::string& what) {
    if (op != ReduceOp::kSum) throw RuntimeFailure("all_reduce (" + what + "): only sums are supported for bfloat16");
    const int64_t n = t.numel();
    auto gathered = torch::empty({n * size_}, t.options());
    count("all_reduce", static_cast<uint64_t>(size_ - 1) * t.nbytes());
    std::vector<std::vector<at::Tensor>> outputs(1);
    auto bits = gathered.view(torch::kHalf);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(bits.narrow(0, r * n, n));
    std::vector<at::Tensor> inputs{t.view({-1}).view(torch::kHalf)};
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    auto finish = [gathered, t, n, size = size_]() mutable {
      torch::NoGradGuard no_grad;
      auto flat = t.view({-1});
      if (n > 0) sum_segments(gathered, size, n, flat);
    };
    return launch([&] { return pg_->allgather(outputs, inputs, o); }, "all_reduce", what, gathered.nbytes(), finish);
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> make_group(const std::string& prefix) const {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout_);
    options->devices = devices_;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store_), rank_, size_,
                                                       options);
  }

  template <class F>
  std::unique_ptr<PendingOp> launch(F&& start, const std::string& op, const std::string& what, uint64_t bytes,
                                    std::function<void()> finish) {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = start();
    } catch (const std::exception& e) {
      throw RuntimeFailure("collective " + op + " of " + what + " on rank " + std::to_string(rank_) +
                           " could not start: " + short_error(e));
    }
    return std::make_unique<WorkPending<c10::intrusive_ptr<c10d::Work>>>(std::move(work), op, what, bytes, rank_, timeout_,
                                                                       std::move(finish));
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<StoreServer> server_;  // rank 0: outlives the store client and the process group
  c10::intrusive_ptr<c10d::Store> store_;
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::unique_ptr<Comm> make_gloo_comm(const DistEnv& env, std::chrono::milliseconds timeout) {
  RendezvousOptions o;
  o.timeout = timeout;
  o.store_timeout = timeout;
  o.token = job_token_from_env();
  return make_gloo_comm(env, o);
}

std::unique_ptr<Comm> make_gloo_comm(const DistEnv& env, const RendezvousOptions& rendezvous_options) {
  return std::make_unique<GlooComm>(env, rendezvous_options);
}

}  // namespace hftrain
