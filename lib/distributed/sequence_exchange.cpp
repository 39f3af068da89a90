// The all-to-all exchanges of Ulysses sequence parallelism as autograd functions (see sequence_exchange.h).
// Segment j of a rank's send buffer goes to rank j: before attention, head group j of this rank's slice;
// after it, slice j of the sequence for this rank's heads. Rank order of what arrives is sequence order
// (before) or head-group order (after).
#include "distributed/sequence_exchange.h"

#include "util/error.h"

namespace hftrain {
namespace {

torch::Tensor exchange(const torch::Tensor& send, Comm& group, const std::string& what) {
  auto received = torch::empty_like(send);
  group.all_to_all(send, received, what);
  return received;
}

// [B, H, S, D] -> [B, H / P, P * S, D]
torch::Tensor to_heads(const torch::Tensor& x, Comm& group, const std::string& what) {
  const int64_t P = group.world_size(), B = x.size(0), H = x.size(1), S = x.size(2), D = x.size(3);
  if (H % P != 0)
    throw RuntimeFailure(what + ": " + std::to_string(H) + " heads do not divide over sequence_parallel_size " +
                         std::to_string(P));
  auto send = x.reshape({B, P, H / P, S, D}).permute({1, 0, 2, 3, 4}).contiguous();  // [P (to rank), B, H/P, S, D]
  auto got = exchange(send, group, what);                                             // [P (from rank), B, H/P, S, D]
  return got.permute({1, 2, 0, 3, 4}).reshape({B, H / P, P * S, D});
}

// [B, H / P, P * S, D] -> [B, H, S, D]
torch::Tensor to_sequence(const torch::Tensor& y, Comm& group, const std::string& what) {
  const int64_t P = group.world_size(), B = y.size(0), h = y.size(1), T = y.size(2), D = y.size(3);
  if (T % P != 0)
    throw RuntimeFailure(what + ": " + std::to_string(T) + " positions do not divide over sequence_parallel_size " +
                         std::to_string(P));
  auto send = y.reshape({B, h, P, T / P, D}).permute({2, 0, 1, 3, 4}).contiguous();  // [P (slice), B, h, S, D]
  auto got = exchange(send, group, what);                                            // [P (head group), B, h, S, D]
  return got.permute({1, 0, 2, 3, 4}).reshape({B, P * h, T / P, D});
}

Comm& group_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<Comm*>(ctx->saved_data["group"].toInt());
}

struct SequenceToHeads : torch::autograd::Function<SequenceToHeads> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, int64_t group,
                               const std::string& what) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["what"] = what;
    return to_heads(x, *reinterpret_cast<Comm*>(group), what);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    return {to_sequence(grads[0], group_of(ctx), ctx->saved_data["what"].toStringRef() + " (backward)"), {}, {}};
  }
};

struct HeadsToSequence : torch::autograd::Function<HeadsToSequence> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y, int64_t group,
                               const std::string& what) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["what"] = what;
    return to_sequence(y, *reinterpret_cast<Comm*>(group), what);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    return {to_heads(grads[0], group_of(ctx), ctx->saved_data["what"].toStringRef() + " (backward)"), {}, {}};
  }
};

}  // namespace

torch::Tensor sequence_to_heads(const torch::Tensor& x, Comm& group, const std::string& what) {
  if (group.world_size() == 1) return x;
  return SequenceToHeads::apply(x, reinterpret_cast<int64_t>(&group), what);
}

torch::Tensor heads_to_sequence(const torch::Tensor& y, Comm& group, const std::string& what) {
  if (group.world_size() == 1) return y;
  return HeadsToSequence::apply(y, reinterpret_cast<int64_t>(&group), what);
}

}  // namespace hftrain
