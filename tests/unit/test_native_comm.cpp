// NativeCollectivesComm (distributed/comm_native.h), the communicator NCCL runs behind, over an in-process
// stand-in for a c10d process group: N threads, each one rank, whose base collectives (all-reduce,
// _reduce_scatter_base, _allgather_base, broadcast) exchange clones through shared memory. The stand-in has
// c10d's contract (equal reduce-scatter segments, flat gathers), so what is tested is the communicator's own
// part: padding uneven segments, staging tensors that live elsewhere, byte counts, and errors that name
// the operation. Expected values are computed by hand from each rank's inputs. On a CUDA build the same
// communicator also runs over a real one-rank ProcessGroupNCCL.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "distributed/comm_native.h"
#include "lazy_device.h"
#include "util/error.h"

#if HFTRAIN_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "distributed/store.h"
#endif

using namespace hftrain;

namespace {

// Every rank's tensor of one collective, handed to every rank once all have arrived.
class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {}
  int size() const { return size_; }
  std::vector<torch::Tensor> exchange(int rank, const torch::Tensor& mine) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !releasing_; });
    slots_[static_cast<std::size_t>(rank)] = mine.clone();
    if (++arrived_ == size_) {
      releasing_ = true;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return releasing_; });
    }
    auto all = slots_;
    if (++departed_ == size_) {
      releasing_ = false;
      arrived_ = departed_ = 0;
      cv_.notify_all();
    }
    return all;
  }

 private:
  int size_;
  std::vector<torch::Tensor> slots_;
  int arrived_ = 0, departed_ = 0;
  bool releasing_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
};

struct FakeWork {
  std::string failure;  // non-empty: wait() throws it, as a backend's failed work item does
  bool wait(std::chrono::milliseconds) {
    if (!failure.empty()) throw std::runtime_error(failure);
    return true;
  }
};

class FakeGroup : public c10::intrusive_ptr_target {
 public:
  FakeGroup(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
  std::string fail_next;  // makes the next work item fail with this message

  std::shared_ptr<FakeWork> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& o) {
    auto all = world_.exchange(rank_, tensors[0]);
    auto acc = all[0].clone();
    for (std::size_t r = 1; r < all.size(); ++r)
      acc = o.reduceOp == c10d::ReduceOp::MAX ? torch::maximum(acc, all[r]) : acc + all[r];
    tensors[0].copy_(acc);
    return done();
  }
  std::shared_ptr<FakeWork> _reduce_scatter_base(at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions&) {
    if (in.numel() != out.numel() * world_.size())  // c10d's contract: equal segments (reported by on_ranks)
      throw std::logic_error("_reduce_scatter_base: unequal segments reached the backend");
    auto all = world_.exchange(rank_, in);
    auto acc = all[0].clone();
    for (std::size_t r = 1; r < all.size(); ++r) acc += all[r];
    out.copy_(acc.narrow(0, rank_ * out.numel(), out.numel()));
    return done();
  }
  std::shared_ptr<FakeWork> _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions&) {
    out.copy_(torch::cat(world_.exchange(rank_, in)));
    return done();
  }
  std::shared_ptr<FakeWork> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                          std::vector<int64_t>& in_splits, const c10d::AllToAllOptions&) {
    const auto all = world_.exchange(rank_, in);
    const auto splits = world_.exchange(rank_, torch::tensor(in_splits.empty() ? std::vector<int64_t>(world_.size(), in.numel() / world_.size())
                                                                               : in_splits, torch::kLong));
    int64_t at = 0;
    for (int r = 0; r < world_.size(); ++r) {  // rank r's segment for this rank starts after its segments for ranks below
      const torch::Tensor theirs = splits[static_cast<std::size_t>(r)];
      const int64_t begin = theirs.narrow(0, 0, rank_).sum().item<int64_t>(), n = theirs[rank_].item<int64_t>();
      if (!out_splits.empty() && out_splits[static_cast<std::size_t>(r)] != n) throw std::logic_error("alltoall_base: splits disagree");
      out.narrow(0, at, n).copy_(all[static_cast<std::size_t>(r)].narrow(0, begin, n));
      at += n;
    }
    return done();
  }
  std::shared_ptr<FakeWork> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& o) {
    tensors[0].copy_(world_.exchange(rank_, tensors[0])[static_cast<std::size_t>(o.rootRank)]);
    return done();
  }

 private:
  std::shared_ptr<FakeWork> done() {
    auto w = std::make_shared<FakeWork>();
    w->failure = std::move(fail_next);
    fail_next.clear();
    return w;
  }
  ThreadWorld& world_;
  int rank_;
};

using FakeComm = NativeCollectivesComm<FakeGroup>;

// Runs `body(comm, group, rank)` on `size` threads, one rank each; a failed check in any thread fails the test.
template <class Body>
void on_ranks(int size, Body body) {
  ThreadWorld world(size);
  std::vector<std::thread> threads;
  std::mutex report;
  std::vector<std::string> errors;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = c10::make_intrusive<FakeGroup>(world, r);
        FakeComm comm(group, r, size, torch::kCPU, std::chrono::milliseconds(5000), "fake");
        body(comm, *group, r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(report);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) FAIL(e);
}

}  // namespace

TEST_CASE("native collectives: uneven reduce-scatter segments are padded, all-to-all exchanges segments, and every result is "
          "the hand-computed one",
          "[unit][dist]") {
  std::mutex check_mu;  // Catch's assertions are not thread-safe
  auto check = [&](bool ok, const std::string& what) {
    std::lock_guard<std::mutex> lock(check_mu);
    CHECK(ok);
    if (!ok) WARN(what);
  };
  on_ranks(3, [&](FakeComm& comm, FakeGroup&, int rank) {
    // Segments of 4, 0 and 2 elements: rank r's input is (r + 1) * [1..6]; segment j's sum is 6 * its values.
    auto input = torch::arange(1, 7, torch::kFloat32) * static_cast<float>(rank + 1);
    const std::vector<int64_t> counts{4, 0, 2};
    auto output = torch::full({counts[static_cast<std::size_t>(rank)]}, -1.0f);
    comm.reduce_scatter(input, counts, output, "uneven segments");
    const int64_t offset = rank == 0 ? 0 : rank == 1 ? 4 : 4;
    auto expected = torch::arange(1, 7, torch::kFloat32).narrow(0, offset, counts[static_cast<std::size_t>(rank)]) * 6.0f;
    check(torch::equal(output, expected), "reduce_scatter on rank " + std::to_string(rank));
    // A ring reduce-scatter of the padded buffer: (N - 1) segments of the widest (4 floats) leave each rank.
    check(comm.stats().bytes_sent.at("reduce_scatter") == 2 * 4 * 4, "reduce_scatter bytes");

    // Equal segments go straight to the backend.
    auto even_in = torch::arange(0, 6, torch::kFloat64) + 10.0 * rank;
    auto even_out = torch::empty({2}, torch::kFloat64);
    comm.reduce_scatter(even_in, {2, 2, 2}, even_out, "even segments");
    auto even_expected = (torch::arange(0, 6, torch::kFloat64) * 3 + 30.0).narrow(0, 2 * rank, 2);
    check(torch::equal(even_out, even_expected), "even reduce_scatter");

    auto gathered = torch::empty({3, 2}, torch::kFloat32);  // any shape of world * n elements
    comm.all_gather(torch::full({2}, static_cast<float>(rank)), gathered, "parameters");
    check(torch::equal(gathered, torch::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f}).view({3, 2})), "all_gather");

    auto summed = torch::full({3}, static_cast<float>(rank + 1));
    comm.all_reduce(summed, ReduceOp::kSum, "sum");
    check(torch::equal(summed, torch::full({3}, 6.0f)), "all_reduce sum");
    check(comm.all_reduce_scalar(rank == 1 ? 7.5 : -1.0, ReduceOp::kMax, "max") == 7.5, "all_reduce max");

    auto value = torch::full({4}, static_cast<float>(rank));
    comm.broadcast(value, 2, "from rank 2");
    check(torch::equal(value, torch::full({4}, 2.0f)), "broadcast");
    const auto ints = comm.all_gather_ints({rank, 10 * rank}, "ints");
    check(ints.size() == 3 && ints[2] == std::vector<int64_t>{2, 20}, "all_gather_ints");

    // All-to-all: rank r sends 10 r + j to rank j (2 elements each), so rank j receives 10 r + j from every r.
    auto a2a_in = torch::arange(0, 6, torch::kFloat32).div(2, "floor") + 10.0f * rank;
    auto a2a_out = torch::empty({6}, torch::kFloat32);
    comm.all_to_all(a2a_in, a2a_out, "heads for sequence");
    auto a2a_expected = torch::tensor({0.f, 0.f, 10.f, 10.f, 20.f, 20.f}) + static_cast<float>(rank);
    check(torch::equal(a2a_out, a2a_expected), "all_to_all on rank " + std::to_string(rank));
    check(comm.stats().bytes_sent.at("all_to_all") == 2 * 2 * 4, "all_to_all bytes");  // (N-1)/N of 24 bytes
    comm.barrier("end");
  });
}

TEST_CASE("native collectives: uneven all-to-all segments, and groups of ranks built by the backend's maker",
          "[unit][dist][expert_parallel]") {
  // 4 ranks; the groups {0, 1} and {2, 3} each over a world of their own, as a backend's new group would be.
  ThreadWorld world(4), low(2), high(2);
  std::mutex check_mu;
  std::vector<std::string> errors;
  auto check = [&](bool ok, const std::string& what) {
    std::lock_guard<std::mutex> lock(check_mu);
    if (!ok) errors.push_back(what);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      try {
        SubgroupMaker maker = [&](const std::vector<int>& ranks, int index, const std::string& name) -> std::unique_ptr<Comm> {
          check(name == (ranks.front() == 0 ? "low" : "high"), "group name " + name);
          auto members = c10::make_intrusive<FakeGroup>(ranks.front() == 0 ? low : high, index);
          return std::make_unique<FakeComm>(members, index, 2, torch::kCPU, std::chrono::milliseconds(5000), "fake");
        };
        FakeComm comm(c10::make_intrusive<FakeGroup>(world, r), r, 4, torch::kCPU, std::chrono::milliseconds(5000), "fake",
                      nullptr, maker);
        // rank r sends j + r elements (values 100 r + j) to rank j
        std::vector<int64_t> in_counts, out_counts;
        std::vector<float> values;
        for (int j = 0; j < 4; ++j) {
          in_counts.push_back(j + r), out_counts.push_back(r + j);
          for (int k = 0; k < j + r; ++k) values.push_back(100.0f * r + j);
        }
        auto out = torch::empty({4 * r + 6});
        comm.all_to_all_v(torch::tensor(values), in_counts, out, out_counts, "expert rows");
        std::vector<float> expected;
        for (int from = 0; from < 4; ++from)
          for (int k = 0; k < from + r; ++k) expected.push_back(100.0f * from + r);
        check(torch::equal(out, torch::tensor(expected)), "all_to_all_v on rank " + std::to_string(r));
        auto group = comm.subgroup(r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, r < 2 ? "low" : "high");
        check(group->rank() == r % 2 && group->world_size() == 2, "member index");
        auto summed = torch::full({1}, static_cast<float>(r));
        group->all_reduce(summed, ReduceOp::kSum, "within the group");
        check(summed.item<float>() == (r < 2 ? 1.0f : 5.0f), "group sum on rank " + std::to_string(r));
      } catch (const std::exception& e) {
        check(false, "rank " + std::to_string(r) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) FAIL(e);
  // without a maker the communicator refuses groups by name
  ThreadWorld alone(1);
  FakeComm single(c10::make_intrusive<FakeGroup>(alone, 0), 0, 1, torch::kCPU, std::chrono::milliseconds(5000), "fake");
  CHECK_THROWS_WITH(single.subgroup({0}, "solo"), Catch::Contains("group solo: this fake communicator cannot build groups"));
}

TEST_CASE("native collectives: tensors on another device travel through copies on the communicator's device",
          "[unit][dist][device]") {
  // The communicator's device is the host here and the tensors live on torch's lazy device, the mirror of
  // an NCCL communicator handed host numbers (all_reduce_scalar, all_gather_ints).
  const torch::Device lazy = hftrain_test::lazy_device();
  std::mutex check_mu;
  std::vector<torch::Tensor> results(2);
  on_ranks(2, [&](FakeComm& comm, FakeGroup&, int rank) {
    auto options = torch::TensorOptions().dtype(torch::kFloat32).device(lazy);
    auto t = torch::full({3}, static_cast<float>(rank + 1), options);
    auto pending = comm.all_reduce_async(t, ReduceOp::kSum, "lazy sum");
    pending->wait();
    auto in = (torch::arange(0, 5, torch::kFloat32) + static_cast<float>(rank)).to(lazy);
    auto out = torch::empty({rank == 0 ? 3 : 2}, options);
    comm.reduce_scatter(in, {3, 2}, out, "lazy segments");
    std::lock_guard<std::mutex> lock(check_mu);
    results[static_cast<std::size_t>(rank)] = torch::cat({t.to(torch::kCPU), out.to(torch::kCPU)});
  });
  CHECK(torch::equal(results[0], torch::tensor({3.f, 3.f, 3.f, 1.f, 3.f, 5.f})));
  CHECK(torch::equal(results[1], torch::tensor({3.f, 3.f, 3.f, 7.f, 9.f})));
}

TEST_CASE("native collectives: a failed collective names the operation, its purpose, its size and the rank, and bad "
          "segment counts are refused",
          "[unit][dist]") {
  std::mutex check_mu;
  std::vector<std::string> messages(2);
  on_ranks(2, [&](FakeComm& comm, FakeGroup& group, int rank) {
    group.fail_next = "NCCL error: unhandled system error";
    auto t = torch::zeros({256});
    try {
      comm.all_reduce(t, ReduceOp::kSum, "gradient bucket 1/3");
    } catch (const RuntimeFailure& e) {
      std::lock_guard<std::mutex> lock(check_mu);
      messages[static_cast<std::size_t>(rank)] = e.what();
    }
    try {
      comm.reduce_scatter(torch::zeros({5}), {2, 2}, torch::zeros({2}), "grads");
      std::lock_guard<std::mutex> lock(check_mu);
      messages[static_cast<std::size_t>(rank)] += " | bad counts accepted";
    } catch (const RuntimeFailure& e) {
      std::lock_guard<std::mutex> lock(check_mu);
      messages[static_cast<std::size_t>(rank)] += std::string(" | ") + e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    const std::string& m = messages[static_cast<std::size_t>(r)];
    CHECK_THAT(m, Catch::Contains("collective all_reduce of gradient bucket 1/3 (1.0 KiB) on rank " + std::to_string(r)) &&
                      Catch::Contains("NCCL error: unhandled system error") &&
                      Catch::Contains("reduce_scatter (grads): segment counts do not match the tensors"));
  }
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("native collectives over a one-rank ProcessGroupNCCL on the GPU", "[unit][dist][gpu]") {
  REQUIRE(torch::cuda::is_available());
  StoreServer server("127.0.0.1", 0, "t");
  std::string error;
  auto store = StoreClient::connect("127.0.0.1", server.port(), "t", "test", std::chrono::milliseconds(10000), error);
  REQUIRE(store);
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, 0, 1, c10d::ProcessGroupNCCL::Options::create());
  const torch::Device gpu(torch::kCUDA, 0);
  NativeCollectivesComm<c10d::ProcessGroupNCCL> comm(group, 0, 1, gpu, std::chrono::milliseconds(30000), "nccl");
  auto t = torch::arange(0, 7, torch::TensorOptions().dtype(torch::kBFloat16).device(gpu));
  comm.all_reduce(t, ReduceOp::kSum, "bf16 sum");
  CHECK(torch::equal(t.cpu(), torch::arange(0, 7, torch::kBFloat16)));
  auto out = torch::empty({7}, t.options());
  comm.reduce_scatter(t, {7}, out, "one segment");
  CHECK(torch::equal(out.cpu(), t.cpu()));
  comm.all_gather(t, out, "gather");
  CHECK(torch::equal(out.cpu(), t.cpu()));
  CHECK(comm.all_reduce_scalar(2.5, ReduceOp::kMax, "host number") == 2.5);  // staged through the GPU
  comm.barrier("end");
}
#endif
