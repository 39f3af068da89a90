// Expert parallelism's token exchange (DeepSpeed-MoE, arXiv:2201.05596; GShard's all-to-all dispatch): each rank of an
// expert-parallel group sends every member the rows of its tokens routed to that member's experts and receives the
// rows the members route to its own, by one all-to-all with uneven segments; after the experts ran, the reverse
// exchange returns each output row to the rank its token came from. An autograd function whose backward is the
// reverse exchange, so each row's gradient reaches the rank that sent it. Models stay free of ranks: the routed
// block calls this through its ExpertParallel seam (models/expert_parallel.h).
#pragma once

#include <string>
#include <vector>

#include "distributed/comm.h"
#include "util/torch_compat.h"

namespace hftrain {

// rows [N, D]: send_rows[j] consecutive rows for member j of `group` (summing to N) -> [sum(recv_rows), D]: the
// recv_rows[j] rows member j sent this rank, in member order. recv_rows[j] must be member j's send_rows[rank].
torch::Tensor exchange_expert_rows(const torch::Tensor& rows, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows, Comm& group, const std::string& what);

}  // namespace hftrain
