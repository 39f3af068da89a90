// Error wording and staging shared by the process-group communicators (see collective_work.h).
#include "distributed/collective_work.h"

#include <cstdio>

#include "util/error.h"

namespace hftrain {

std::string short_error(const std::exception& e) {
  std::string msg = e.what();
  // c10 errors carry a backtrace after the message ("Exception raised from ..." or "frame #0: ...").
  for (const char* marker : {"\nException raised from", "\nframe #"}) {
    auto cut = msg.find(marker);
    if (cut != std::string::npos) msg = msg.substr(0, cut);
  }
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string collective_failure(const std::string& op, const std::string& what, uint64_t bytes, int rank,
                               double elapsed_s, std::chrono::milliseconds timeout, const std::exception& cause) {
  const double limit = std::chrono::duration<double>(timeout).count();
  char head[256];
  std::snprintf(head, sizeof head, "%s of %s (%s) on rank %d ", op.c_str(), what.c_str(), human_bytes(bytes).c_str(), rank);
  std::string msg = head;
  const std::string reason = short_error(cause);
  if (reason.find("can't allocate memory") != std::string::npos || reason.find("out of memory") != std::string::npos) {
    msg += "ran out of memory on this rank";
  } else if (elapsed_s + 0.05 >= limit) {
    std::snprintf(head, sizeof head, "did not finish within distributed.ddp_timeout (%g s)", limit);
    msg += head;
  } else {
    std::snprintf(head, sizeof head, "failed after %.1f s (another worker probably exited; see its error)", elapsed_s);
    msg += head;
  }
  return "collective " + msg + ": " + reason;
}

int64_t check_segment_counts(const std::vector<int64_t>& counts, int size, int rank, const torch::Tensor& input,
                             const torch::Tensor& output, const std::string& what) {
  int64_t total = 0;
  for (auto c : counts) total += c;
  if (static_cast<int>(counts.size()) != size || total != input.numel() || output.numel() != counts[static_cast<std::size_t>(rank)])
    throw RuntimeFailure("reduce_scatter (" + what + "): segment counts do not match the tensors");
  return total;
}

uint64_t check_equal_segments(const torch::Tensor& input, const torch::Tensor& output, int size, const std::string& what) {
  if (output.numel() != input.numel() || input.numel() % size != 0)
    throw RuntimeFailure("all_to_all (" + what + "): " + std::to_string(input.numel()) + " elements in, " +
                         std::to_string(output.numel()) + " out, for " + std::to_string(size) + " equal segments");
  return input.nbytes() * static_cast<uint64_t>(size - 1) / static_cast<uint64_t>(size);
}

uint64_t check_split_counts(const torch::Tensor& input, const std::vector<int64_t>& in_counts, const torch::Tensor& output,
                            const std::vector<int64_t>& out_counts, int size, int rank, const std::string& what) {
  int64_t sent = 0, received = 0;
  bool negative = false;
  for (auto c : in_counts) sent += c, negative |= c < 0;
  for (auto c : out_counts) received += c, negative |= c < 0;
  if (static_cast<int>(in_counts.size()) != size || static_cast<int>(out_counts.size()) != size || negative ||
      sent != input.numel() || received != output.numel())
    throw RuntimeFailure("all_to_all_v (" + what + "): " + std::to_string(input.numel()) + " elements in and " +
                         std::to_string(output.numel()) + " out do not match the split counts of " + std::to_string(size) +
                         " ranks");
  return static_cast<uint64_t>(sent - in_counts[static_cast<std::size_t>(rank)]) * input.element_size();
}

void StagedOp::wait() {
  if (!inner_) return;
  inner_->wait();
  inner_.reset();
  torch::NoGradGuard no_grad;
  copy_back_();
}

}  // namespace hftrain
