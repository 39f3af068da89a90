// Expert parallelism's row exchange as an autograd function (see expert_exchange.h).
#include "distributed/expert_exchange.h"

#include "util/error.h"

namespace hftrain {
namespace {

std::vector<int64_t> elements_of(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> elements;
  for (int64_t r : rows) elements.push_back(r * width);
  return elements;
}

torch::Tensor send_rows_to_members(const torch::Tensor& rows, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows, Comm& group, const std::string& what) {
  const int64_t width = rows.size(1);
  int64_t received = 0;
  for (int64_t r : recv_rows) received += r;
  const torch::Tensor send = rows.contiguous();
  torch::Tensor got = torch::empty({received, width}, rows.options());
  group.all_to_all_v(send, elements_of(send_rows, width), got, elements_of(recv_rows, width), what);
  return got;
}

struct ExpertRowExchange : torch::autograd::Function<ExpertRowExchange> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows, std::vector<int64_t> send_rows,
                               std::vector<int64_t> recv_rows, int64_t group, const std::string& what) {
    ctx->saved_data["send"] = send_rows;
    ctx->saved_data["recv"] = recv_rows;
    ctx->saved_data["group"] = group;
    ctx->saved_data["what"] = what;
    return send_rows_to_members(rows, send_rows, recv_rows, *reinterpret_cast<Comm*>(group), what);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    Comm& group = *reinterpret_cast<Comm*>(ctx->saved_data["group"].toInt());
    // each row's gradient goes back to the member that sent the row: the counts trade places
    torch::Tensor back = send_rows_to_members(grads[0], ctx->saved_data["recv"].toIntVector(),
                                              ctx->saved_data["send"].toIntVector(), group,
                                              ctx->saved_data["what"].toStringRef() + " (backward)");
    return {back, {}, {}, {}, {}};
  }
};

}  // namespace

torch::Tensor exchange_expert_rows(const torch::Tensor& rows, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows, Comm& group, const std::string& what) {
  if (rows.dim() != 2) throw RuntimeFailure(what + ": expert rows must be [rows, width]");
  if (group.world_size() == 1) return rows;
  return ExpertRowExchange::apply(rows, send_rows, recv_rows, reinterpret_cast<int64_t>(&group), what);
}

}  // namespace hftrain
