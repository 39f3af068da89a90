// DeepSpeed-compatible static and dynamic loss scaling (see loss_scaler.h).
#include "engine/loss_scaler.h"

#include <cmath>

#include "util/error.h"

namespace hftrain {

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config),
      cur_scale_(config.dynamic ? std::ldexp(1.0, static_cast<int>(config.initial_scale_power)) : config.static_scale),
      cur_hysteresis_(config.hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!config_.dynamic) return;
  if (overflow) {
    if (config_.hysteresis == 1 || cur_hysteresis_ == 1) {
      if (cur_scale_ == config_.min_scale && config_.raise_error_at_min_scale)
        throw RuntimeFailure("fp16 loss scale is already at precision.min_loss_scale (" + std::to_string(cur_scale_) +
                             ") and the gradients still overflow at step attempt " + std::to_string(cur_iter_ + 1) +
                             "; the run cannot continue (lower the learning rate, or train in bf16)");
      cur_scale_ = std::max(cur_scale_ / config_.scale_factor, config_.min_scale);
    } else {
      cur_hysteresis_ -= 1;
    }
    last_overflow_iter_ = cur_iter_;
  } else {
    if (config_.consecutive_hysteresis) cur_hysteresis_ = config_.hysteresis;
    if ((cur_iter_ - last_overflow_iter_) % config_.scale_window == 0) {
      if (!config_.consecutive_hysteresis) cur_hysteresis_ = config_.hysteresis;
      cur_scale_ *= config_.scale_factor;
    }
  }
  cur_iter_ += 1;
}

std::map<std::string, torch::Tensor> LossScaler::state() const {
  return {{"loss_scaler.cur_scale", torch::tensor(cur_scale_, torch::kFloat64)},
          {"loss_scaler.cur_iter", torch::tensor(cur_iter_, torch::kLong)},
          {"loss_scaler.last_overflow_iter", torch::tensor(last_overflow_iter_, torch::kLong)},
          {"loss_scaler.cur_hysteresis", torch::tensor(cur_hysteresis_, torch::kLong)}};
}

bool LossScaler::load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
  if (!config_.dynamic) return true;  // a static scale has no state to restore
  if (!state.count("loss_scaler.cur_scale")) return false;
  auto get = [&](const std::string& key) {
    auto it = state.find(key);
    if (it == state.end() || it->second.numel() != 1)
      throw RuntimeFailure("'" + source + "': the loss-scaler state is incomplete ('" + key + "' is missing or not a scalar)");
    return it->second;
  };
  cur_scale_ = get("loss_scaler.cur_scale").item<double>();
  cur_iter_ = get("loss_scaler.cur_iter").item<int64_t>();
  last_overflow_iter_ = get("loss_scaler.last_overflow_iter").item<int64_t>();
  cur_hysteresis_ = get("loss_scaler.cur_hysteresis").item<int64_t>();
  return true;
}

}  // namespace hftrain
