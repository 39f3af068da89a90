// The seam through which a routed block runs expert parallelism (distributed.expert_parallel_size, DeepSpeed-MoE's
// ep_size): the run hands the model the group of ranks that share the experts (Model::set_expert_parallel), member j
// of a group of P running experts [j E / P, (j + 1) E / P) of every routed layer; a training forward sends each
// token's rows to the members running its experts and gets their outputs back (distributed/expert_exchange). The
// model holds this object and knows no ranks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "util/torch_compat.h"

namespace hftrain {

// Runs this rank's experts [first, first + per_expert.size()) over `rows`, per_expert[i] consecutive rows for each,
// and returns their outputs in the same order.
using LocalExperts = std::function<torch::Tensor(const torch::Tensor& rows, int64_t first, const std::vector<int64_t>& per_expert)>;

class ExpertParallel {
 public:
  explicit ExpertParallel(std::shared_ptr<Comm> group) : group_(std::move(group)) {}
  int64_t size() const { return group_->world_size(); }
  int64_t rank() const { return group_->rank(); }
  // "" when `experts` divide over the group, else why not (naming both numbers).
  std::string experts_problem(int64_t experts) const;
  // The routed experts of each routed layer (the model sets it when it takes the group).
  void set_experts(int64_t experts) { experts_ = experts; }
  // The member that runs the routed expert a parameter belongs to (a name with ".experts.<e>." in it, the HF layout
  // of every MoE family), -1 for any other parameter (the router, a shared expert, the dense layers).
  int64_t member_of_parameter(const std::string& name) const;
  // Expert data parallelism (the engine's choice, engine/engine_builder): a member's experts live only on the ranks
  // with its member index, so a rank never calls the experts it does not run, and evaluation and generation send
  // the rows to their members too (every rank of the group evaluates the same batches).
  void set_sharded(bool sharded) { sharded_ = sharded; }
  bool sharded() const { return sharded_; }
  // rows [slots, D] sorted by expert, `counts` [experts] (int64, CPU) the rows of each -> every row's expert output,
  // in the rows' order: the rows travel to the members that run their experts, `run_local` computes this rank's
  // share of everybody's rows, and the outputs travel back. Every member calls it for the same layer in turn.
  torch::Tensor run(const torch::Tensor& rows, const torch::Tensor& counts, const LocalExperts& run_local,
                    const std::string& what) const;

 private:
  std::shared_ptr<Comm> group_;
  int64_t experts_ = 0;
  bool sharded_ = false;
};

}  // namespace hftrain
