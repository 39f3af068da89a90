// GaLore's SVD projector (see galore_projector.h).
#include "optim/galore_projector.h"

#include <algorithm>

#include "optim/optimizer.h"
#include "util/error.h"
#include "util/tensor_bytes.h"

namespace hftrain {

const std::vector<std::string>& galore_proj_types() {
  static const std::vector<std::string> t = {"std", "reverse_std", "left", "right", "full"};
  return t;
}

GaloreProjector::GaloreProjector(torch::IntArrayRef shape, const GaloreSettings& s) {
  if (shape.size() != 2) throw RuntimeFailure("GaLore projects 2-D weights only");
  m_ = shape[0];
  n_ = shape[1];
  r_ = std::min({s.rank, m_, n_});
  gap_ = s.update_proj_gap;
  scale_ = s.scale;
  const bool tall = m_ >= n_;
  if (s.proj_type == "std") {
    (tall ? right_ : left_) = true;
  } else if (s.proj_type == "reverse_std") {
    (tall ? left_ : right_) = true;
  } else if (s.proj_type == "left") {
    left_ = true;
  } else if (s.proj_type == "right") {
    right_ = true;
  } else if (s.proj_type == "full") {
    left_ = right_ = true;
  } else {
    throw ConfigError("optimizer.proj_type: '" + s.proj_type + "' is not one of std, reverse_std, left, right, full");
  }
}

torch::Tensor GaloreProjector::project(const torch::Tensor& grad) {
  if ((step_ % gap_) == 0) {
    auto [u, sv, vh] = at::linalg_svd(grad.to(torch::kFloat), /*full_matrices=*/false);
    if (left_) p_ = u.narrow(1, 0, r_).contiguous();
    if (right_) qt_ = vh.narrow(0, 0, r_).contiguous();
  }
  step_ += 1;
  // A projection read from a checkpoint arrives in host memory; it is used where the gradients are.
  if (p_.defined() && p_.device() != grad.device()) p_ = p_.to(grad.device());
  if (qt_.defined() && qt_.device() != grad.device()) qt_ = qt_.to(grad.device());
  torch::Tensor r = grad;
  if (left_) r = torch::matmul(p_.t(), r);
  if (right_) r = torch::matmul(r, qt_.t());
  return r;
}

torch::Tensor GaloreProjector::project_back(const torch::Tensor& low) const {
  torch::Tensor full = low;
  if (left_) full = torch::matmul(p_, full);
  if (right_) full = torch::matmul(full, qt_);
  return full.mul(scale_);
}

std::vector<int64_t> GaloreProjector::low_rank_shape() const { return {left_ ? r_ : m_, right_ ? r_ : n_}; }

void GaloreProjector::save(const std::string& name, std::map<std::string, torch::Tensor>& out) const {
  out[name + ".galore_step"] = torch::tensor(step_, torch::kLong);
  if (left_) out[name + ".galore_left"] = p_;
  if (right_) out[name + ".galore_right"] = qt_;
}

bool GaloreProjector::load(const std::string& name, const std::map<std::string, torch::Tensor>& state) {
  const bool has_step = state.count(name + ".galore_step") > 0;
  const bool has_left = state.count(name + ".galore_left") > 0, has_right = state.count(name + ".galore_right") > 0;
  if (!has_step && !has_left && !has_right) return false;
  if (!has_step || has_left != left_ || has_right != right_)
    throw RuntimeFailure("optimizer state for '" + name + "' does not hold this proj_type's GaLore projection (" +
                         std::string(left_ ? "galore_left " : "") + std::string(right_ ? "galore_right " : "") +
                         "and galore_step; was it written with another proj_type or target list?)");
  const auto st = state.at(name + ".galore_step");
  step_ = st.to(torch::kLong).item<int64_t>();
  if (left_) p_ = find_state(state, name, "galore_left", std::vector<int64_t>{m_, r_});
  if (right_) qt_ = find_state(state, name, "galore_right", std::vector<int64_t>{r_, n_});
  return true;
}

int64_t GaloreProjector::state_bytes() const {
  return tensor_bytes(p_) + tensor_bytes(qt_);
}

}  // namespace hftrain
