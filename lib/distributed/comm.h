// Comm: the collectives the engine needs (all-reduce, reduce-scatter, all-gather, broadcast, all-to-all,
// all-to-all-v, barrier) and groups of ranks (subgroup: the sequence- and expert-parallel groups) behind one interface, with a single-process implementation (world size 1: everything is a no-op
// or a copy) and a Gloo one (c10d ProcessGroupGloo over a TCPStore rendezvous). Gloo in LibTorch 1.13
// has neither reduce_scatter nor _allgather_base, so:
//   reduce_scatter = all-to-all-v (each rank sends every other rank its segment) + a local sum in rank
//                    order; a rank sends S - S_own bytes, as a ring reduce-scatter would;
//   all_gather     = Gloo's list all-gather into views of the flat output; a rank sends (N-1) * n bytes.
// Gloo reads and writes host memory only: tensors on a device go through host copies, copied back when
// the operation is waited for. Workers on GPUs use NCCL instead (comm_nccl.h, comm_native.h; docs/gpu.md).
// Every operation counts the bytes this rank sends (the algorithm's payload, see docs/distributed.md)
// and fails after distributed.ddp_timeout with a RuntimeFailure naming the operation and its purpose.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

struct DistEnv;
struct RendezvousOptions;

enum class ReduceOp { kSum, kMax };

// An operation in flight. wait() completes it (or throws RuntimeFailure naming it); waiting twice is a no-op.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
};

// Bytes this rank has sent, by operation name ("all_reduce", "reduce_scatter", "all_gather", "broadcast").
struct CommStats {
  std::map<std::string, uint64_t> bytes_sent;
  std::map<std::string, uint64_t> calls;
  uint64_t total_bytes() const;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;

  // In-place element-wise reduction of `t` (contiguous) over all ranks. `what` says what the data is
  // ("gradient bucket 2/5") for error messages.
  virtual std::unique_ptr<PendingOp> all_reduce_async(torch::Tensor t, ReduceOp op, const std::string& what) = 0;
  // `input` holds world_size consecutive segments of counts[j] elements; `output` (counts[rank] elements)
  // receives the sum over ranks of segment `rank`. Counts may differ between segments and may be zero.
  virtual std::unique_ptr<PendingOp> reduce_scatter_async(torch::Tensor input, std::vector<int64_t> counts,
                                                          torch::Tensor output, const std::string& what) = 0;
  // `output` (world_size * input.numel() elements) receives every rank's `input` in rank order.
  virtual std::unique_ptr<PendingOp> all_gather_async(torch::Tensor input, torch::Tensor output,
                                                      const std::string& what) = 0;
  // Copies `t` on rank `root` into `t` on every rank.
  virtual std::unique_ptr<PendingOp> broadcast_async(torch::Tensor t, int root, const std::string& what) = 0;
  // `input` holds world_size equal segments; `output` (as many elements) receives, in rank order, segment `rank`
  // of every rank's input (the exchange of sequence parallelism and expert parallelism). A rank sends the
  // (N-1)/N of its input that other ranks receive.
  virtual std::unique_ptr<PendingOp> all_to_all_async(torch::Tensor input, torch::Tensor output, const std::string& what) = 0;
  // The uneven form (expert parallelism's token exchange): `input` holds world_size consecutive segments of
  // in_counts[j] elements, segment j going to rank j; `output` receives out_counts[j] elements from rank j, in rank
  // order. out_counts[j] must equal rank j's in_counts[rank]; counts may be zero. A rank sends what leaves it.
  virtual std::unique_ptr<PendingOp> all_to_all_v_async(torch::Tensor input, std::vector<int64_t> in_counts, torch::Tensor output,
                                                        std::vector<int64_t> out_counts, const std::string& what) = 0;
  virtual void barrier(const std::string& what) = 0;
  // The communicator of the group of world ranks `ranks` (ascending, this rank among them; its rank in the group
  // is its index there), for collectives among the members only. Every member calls it with the same ranks and
  // `name` (unique per group in the job); other ranks do not. Throws RuntimeFailure naming the group otherwise.
  virtual std::unique_ptr<Comm> subgroup(const std::vector<int>& ranks, const std::string& name) = 0;

  // Blocking forms.
  void all_reduce(torch::Tensor t, ReduceOp op, const std::string& what) { all_reduce_async(t, op, what)->wait(); }
  void reduce_scatter(torch::Tensor input, std::vector<int64_t> counts, torch::Tensor output, const std::string& what) {
    reduce_scatter_async(input, std::move(counts), output, what)->wait();
  }
  void all_gather(torch::Tensor input, torch::Tensor output, const std::string& what) {
    all_gather_async(input, output, what)->wait();
  }
  void broadcast(torch::Tensor t, int root, const std::string& what) { broadcast_async(t, root, what)->wait(); }
  void all_to_all(torch::Tensor input, torch::Tensor output, const std::string& what) {
    all_to_all_async(input, output, what)->wait();
  }
  void all_to_all_v(torch::Tensor input, std::vector<int64_t> in_counts, torch::Tensor output, std::vector<int64_t> out_counts,
                    const std::string& what) {
    all_to_all_v_async(input, std::move(in_counts), output, std::move(out_counts), what)->wait();
  }
  // Reduces one number (as float64) over all ranks.
  double all_reduce_scalar(double value, ReduceOp op, const std::string& what);
  // Every rank's `values` (same length everywhere), rank-major.
  std::vector<std::vector<int64_t>> all_gather_ints(const std::vector<int64_t>& values, const std::string& what);

  const CommStats& stats() const { return stats_; }

 protected:
  void count(const std::string& op, uint64_t bytes);
  CommStats stats_;
};

// World size 1: reductions and gathers are identities (or copies); nothing is sent.
class LocalComm : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::unique_ptr<PendingOp> all_reduce_async(torch::Tensor t, ReduceOp op, const std::string& what) override;
  std::unique_ptr<PendingOp> reduce_scatter_async(torch::Tensor input, std::vector<int64_t> counts, torch::Tensor output,
                                                  const std::string& what) override;
  std::unique_ptr<PendingOp> all_gather_async(torch::Tensor input, torch::Tensor output, const std::string& what) override;
  std::unique_ptr<PendingOp> broadcast_async(torch::Tensor t, int root, const std::string& what) override;
  std::unique_ptr<PendingOp> all_to_all_async(torch::Tensor input, torch::Tensor output, const std::string& what) override;
  std::unique_ptr<PendingOp> all_to_all_v_async(torch::Tensor input, std::vector<int64_t> in_counts, torch::Tensor output,
                                                std::vector<int64_t> out_counts, const std::string& what) override;
  void barrier(const std::string&) override {}
  std::unique_ptr<Comm> subgroup(const std::vector<int>& ranks, const std::string& name) override;
};

// Throws RuntimeFailure unless `ranks` is ascending, within [0, world_size) and holds `rank`; returns its index.
int rank_in_group(const std::vector<int>& ranks, int rank, int world_size, const std::string& name);

// Rendezvous at env.master_addr:master_port (rank 0 hosts the store, distributed/rendezvous.h) and a
// Gloo process group. `timeout` bounds the rendezvous and every collective; the job token comes from
// HFTRAIN_RDZV_TOKEN and nothing is compared between ranks.
std::unique_ptr<Comm> make_gloo_comm(const DistEnv& env, std::chrono::milliseconds timeout);
// The same with the rendezvous's own timeout, token and agreement facts; options.store_timeout bounds
// every collective (distributed.ddp_timeout).
std::unique_ptr<Comm> make_gloo_comm(const DistEnv& env, const RendezvousOptions& options);

// The process-wide communicator: LocalComm until a worker installs its own at start-up.
Comm& world();
void set_world(std::unique_ptr<Comm> comm);
// True on the rank that writes files and logs (rank 0).
inline bool is_main_rank() { return world().rank() == 0; }

}  // namespace hftrain
