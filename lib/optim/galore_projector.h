// GaLore's gradient projector for one 2-D weight (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training
// by Gradient Low-Rank Projection", arXiv:2403.03507, Algorithm 2). Every `update_gap` steps of the
// tensor (its steps 1, 1 + gap, 1 + 2 gap, ...) the projection is recomputed from the SVD of that step's
// gradient G = U S V^T (m x n, thin SVD in float32): P = U[:, :r] (left, m x r) and/or Q^T = V^T[:r, :]
// (right, r x n), r = min(rank, m, n). In between the last projection is kept.
//   left:  R = P^T G (r x n),     back(N) = scale * P N
//   right: R = G Q (m x r),       back(N) = scale * N Q^T
//   full:  R = P^T G Q (r x r),   back(N) = scale * P N Q^T
// proj_type std projects the smaller side (right when m >= n, else left: the paper's choice of P for
// m <= n), reverse_std the other one, left / right / full always that one.
#pragma once

#include <map>
#include <string>

#include "util/torch_compat.h"

namespace hftrain {

struct GaloreSettings {
  int64_t rank = 128;
  int64_t update_proj_gap = 200;
  double scale = 0.25;
  std::string proj_type = "std";
};

// The proj_type names, for the option's choices.
const std::vector<std::string>& galore_proj_types();

class GaloreProjector {
 public:
  GaloreProjector() = default;
  // For a weight of `shape` (2-D).
  GaloreProjector(torch::IntArrayRef shape, const GaloreSettings& settings);
  // Counts a step of the tensor, refreshes the projection when it is due, returns R for gradient `grad`.
  torch::Tensor project(const torch::Tensor& grad);
  // scale * the full-size matrix of a low-rank update N.
  torch::Tensor project_back(const torch::Tensor& low_rank) const;
  // Shape of R (and of the inner optimizer's state).
  std::vector<int64_t> low_rank_shape() const;
  // Checkpoint slots under "<name>.": galore_step, galore_left (P) and / or galore_right (Q^T).
  void save(const std::string& name, std::map<std::string, torch::Tensor>& out) const;
  // false when nothing was saved for `name`; a partial or misshapen entry throws RuntimeFailure naming it.
  bool load(const std::string& name, const std::map<std::string, torch::Tensor>& state);
  int64_t state_bytes() const;

 private:
  bool left_ = false, right_ = false;
  int64_t m_ = 0, n_ = 0, r_ = 0, gap_ = 1, step_ = 0;
  double scale_ = 1.0;
  torch::Tensor p_, qt_;  // m x r, r x n
};

}  // namespace hftrain
