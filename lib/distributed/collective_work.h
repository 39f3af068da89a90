// What the process-group communicators (comm_gloo, comm_native.h) share: a c10d work item as a PendingOp
// whose failure names the operation, its purpose, its size and the rank, and an operation on staged copies
// (host copies for Gloo, device copies for NCCL) that copies its result back once it has finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "util/error.h"

namespace hftrain {

// A c10 error's message without the backtrace c10 appends.
std::string short_error(const std::exception& e);
std::string human_bytes(uint64_t bytes);
// The RuntimeFailure message of a collective that failed after `elapsed` of `timeout` (ran out of memory,
// timed out, or failed because another worker went away).
std::string collective_failure(const std::string& op, const std::string& what, uint64_t bytes, int rank,
                               double elapsed_s, std::chrono::milliseconds timeout, const std::exception& cause);

// Checks reduce-scatter's segment counts (one per rank, summing to input, this rank's equal to output);
// returns their total. RuntimeFailure naming `what` otherwise.
int64_t check_segment_counts(const std::vector<int64_t>& counts, int size, int rank, const torch::Tensor& input,
                             const torch::Tensor& output, const std::string& what);

// Checks all-to-all's tensors (as many elements out as in, in `size` equal segments); returns the bytes a rank
// sends, (size - 1) / size of its input. RuntimeFailure naming `what` otherwise.
uint64_t check_equal_segments(const torch::Tensor& input, const torch::Tensor& output, int size, const std::string& what);

// Checks all-to-all-v's counts (one per rank each, summing to the input's and the output's elements); returns the
// bytes a rank sends (its input less the segment it keeps). RuntimeFailure naming `what` otherwise.
uint64_t check_split_counts(const torch::Tensor& input, const std::vector<int64_t>& in_counts, const torch::Tensor& output,
                            const std::vector<int64_t>& out_counts, int size, int rank, const std::string& what);

// A work item (c10::intrusive_ptr<c10d::Work> or anything with wait(timeout)) plus what to do once it has
// finished (e.g. sum the received segments). No wait in the destructor: the work item keeps its tensors
// alive until it finishes, and an abandoned operation only happens on the way to exiting the worker.
template <class WorkPtr>
class WorkPending : public PendingOp {
 public:
  WorkPending(WorkPtr work, std::string op, std::string what, uint64_t bytes, int rank, std::chrono::milliseconds timeout,
              std::function<void()> finish)
      : work_(std::move(work)), op_(std::move(op)), what_(std::move(what)), bytes_(bytes), rank_(rank), timeout_(timeout),
        finish_(std::move(finish)), start_(std::chrono::steady_clock::now()) {}

  void wait() override {
    if (done_) return;
    done_ = true;
    try {
      // The backends enforce the same timeout on their own transfers; the slack lets their message win.
      work_->wait(timeout_ + std::chrono::milliseconds(2000));
    } catch (const std::exception& e) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      throw RuntimeFailure(collective_failure(op_, what_, bytes_, rank_, elapsed, timeout_, e));
    }
    if (finish_) finish_();
  }

 private:
  WorkPtr work_;
  std::string op_, what_;
  uint64_t bytes_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::function<void()> finish_;
  std::chrono::steady_clock::time_point start_;
  bool done_ = false;
};

// An operation on staged copies of the caller's tensors, then `copy_back` once it is done.
class StagedOp : public PendingOp {
 public:
  StagedOp(std::unique_ptr<PendingOp> inner, std::function<void()> copy_back)
      : inner_(std::move(inner)), copy_back_(std::move(copy_back)) {}
  void wait() override;

 private:
  std::unique_ptr<PendingOp> inner_;
  std::function<void()> copy_back_;
};

}  // namespace hftrain
