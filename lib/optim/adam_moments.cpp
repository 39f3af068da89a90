// Adam moments in float32 or block-wise 8-bit (see adam_moments.h).
#include "optim/adam_moments.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/tensor_bytes.h"

namespace hftrain {

AdamMoments::AdamMoments(torch::IntArrayRef shape, const AdamMomentsConfig& config) : config_(config) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  if (config_.quantized) {
    const int64_t numel = c10::multiply_integers(shape);
    const auto u8 = torch::TensorOptions().dtype(torch::kUInt8);
    q_avg_ = {torch::zeros(shape, u8), torch::zeros({quant_block_count(numel, config_.block_size)}, f32)};
    q_avg_sq_ = {torch::zeros(shape, u8), torch::zeros({quant_block_count(numel, config_.block_size)}, f32)};
  } else {
    exp_avg_ = torch::zeros(shape, f32);
    exp_avg_sq_ = torch::zeros(shape, f32);
  }
}

AdamMoments::Work AdamMoments::update(const torch::Tensor& grad_in, double lr) {
  // The moments live in host memory: a device gradient is copied here, and the step's tensors go back to it.
  const torch::Tensor grad = grad_in.device().is_cpu() ? grad_in : grad_in.to(torch::kCPU);
  const double b1 = config_.beta1, b2 = config_.beta2;
  step_ += 1;
  const double t = static_cast<double>(step_);
  torch::Tensor m = config_.quantized ? dequantize_blockwise(q_avg_, QuantSign::kSigned, config_.block_size) : exp_avg_;
  torch::Tensor v = config_.quantized ? dequantize_blockwise(q_avg_sq_, QuantSign::kUnsigned, config_.block_size)
                                      : exp_avg_sq_;
  m.mul_(b1).add_(grad, 1 - b1);
  v.mul_(b2).addcmul_(grad, grad, 1 - b2);
  Work w;
  w.step_size = lr / (1 - std::pow(b1, t));
  w.denom = (v.sqrt() / std::sqrt(1 - std::pow(b2, t))).add_(config_.eps);
  w.exp_avg = m;
  if (config_.quantized) {
    q_avg_ = quantize_blockwise(m, QuantSign::kSigned, config_.block_size);
    q_avg_sq_ = quantize_blockwise(v, QuantSign::kUnsigned, config_.block_size);
  }
  if (!grad_in.device().is_cpu()) {
    w.exp_avg = w.exp_avg.to(grad_in.device());
    w.denom = w.denom.to(grad_in.device());
  }
  return w;
}

void AdamMoments::update_param(torch::Tensor& param, const torch::Tensor& grad, double lr) {
  if (!config_.quantized || !param.device().is_cpu() || !param.is_contiguous() || param.scalar_type() != torch::kFloat) {
    const Work w = update(grad, lr);
    param.addcdiv_(w.exp_avg, w.denom, -w.step_size);
    return;
  }
  const double b1 = config_.beta1, b2 = config_.beta2;
  step_ += 1;
  const double t = static_cast<double>(step_);
  const double step_size = lr / (1 - std::pow(b1, t)), bias_correction2_sqrt = std::sqrt(1 - std::pow(b2, t));
  const int64_t n = param.numel(), block = config_.block_size;
  const int64_t run_blocks = std::max<int64_t>(1, (int64_t{1} << 20) / block);
  torch::Tensor p = param.view({-1}), g = grad.reshape({-1});
  torch::Tensor m_codes = q_avg_.codes.view({-1}), v_codes = q_avg_sq_.codes.view({-1});
  for (int64_t b0 = 0; b0 * block < n; b0 += run_blocks) {
    const int64_t lo = b0 * block, hi = std::min(n, (b0 + run_blocks) * block);
    const int64_t blocks = quant_block_count(hi - lo, block);
    QuantizedTensor qm{m_codes.narrow(0, lo, hi - lo), q_avg_.absmax.narrow(0, b0, blocks)};
    QuantizedTensor qv{v_codes.narrow(0, lo, hi - lo), q_avg_sq_.absmax.narrow(0, b0, blocks)};
    torch::Tensor m = dequantize_blockwise(qm, QuantSign::kSigned, block);
    torch::Tensor v = dequantize_blockwise(qv, QuantSign::kUnsigned, block);
    const torch::Tensor gr = g.narrow(0, lo, hi - lo);
    m.mul_(b1).add_(gr, 1 - b1);
    v.mul_(b2).addcmul_(gr, gr, 1 - b2);
    const torch::Tensor denom = (v.sqrt() / bias_correction2_sqrt).add_(config_.eps);
    p.narrow(0, lo, hi - lo).addcdiv_(m, denom, -step_size);
    const QuantizedTensor nm = quantize_blockwise(m, QuantSign::kSigned, block);
    const QuantizedTensor nv = quantize_blockwise(v, QuantSign::kUnsigned, block);
    qm.codes.copy_(nm.codes), qm.absmax.copy_(nm.absmax);
    qv.codes.copy_(nv.codes), qv.absmax.copy_(nv.absmax);
  }
}

void AdamMoments::save(const std::string& name, std::map<std::string, torch::Tensor>& out) const {
  out[name + ".step"] = torch::tensor(step_, torch::kLong);
  if (config_.quantized) {
    out[name + ".exp_avg_q8"] = q_avg_.codes;
    out[name + ".exp_avg_absmax"] = q_avg_.absmax;
    out[name + ".exp_avg_sq_q8"] = q_avg_sq_.codes;
    out[name + ".exp_avg_sq_absmax"] = q_avg_sq_.absmax;
  } else {
    out[name + ".exp_avg"] = exp_avg_;
    out[name + ".exp_avg_sq"] = exp_avg_sq_;
  }
}

bool AdamMoments::load(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                       torch::IntArrayRef shape, const AdamMomentsConfig& config) {
  config_ = config;
  const std::vector<std::string> slots = config.quantized
                                             ? std::vector<std::string>{"exp_avg_q8", "exp_avg_absmax", "exp_avg_sq_q8",
                                                                        "exp_avg_sq_absmax", "step"}
                                             : std::vector<std::string>{"exp_avg", "exp_avg_sq", "step"};
  int found = 0;
  for (const auto& s : slots) found += state.count(name + "." + s) ? 1 : 0;
  if (found == 0) return false;
  if (found != static_cast<int>(slots.size())) {
    std::string list;
    for (const auto& s : slots) list += (list.empty() ? "" : ", ") + s;
    throw RuntimeFailure("optimizer state for '" + name + "' is incomplete (" +
                         std::string(config.quantized ? "8-bit" : "32-bit") + " moments need " + list +
                         "; was the checkpoint written with another optimizer or min_8bit_size?)");
  }
  step_ = find_step(state, name);
  // These moments live in host memory (the 8-bit codes are read through host pointers), wherever the engine
  // put the state it was given.
  auto host = [&](const std::string& slot, const std::vector<int64_t>& want) {
    torch::Tensor t = find_state(state, name, slot, want);
    return t.defined() ? t.to(torch::kCPU) : t;
  };
  if (config.quantized) {
    const std::vector<int64_t> blocks{quant_block_count(c10::multiply_integers(shape), config.block_size)};
    q_avg_ = {host("exp_avg_q8", shape.vec()), host("exp_avg_absmax", blocks)};
    q_avg_sq_ = {host("exp_avg_sq_q8", shape.vec()), host("exp_avg_sq_absmax", blocks)};
    for (const auto* t : {&q_avg_.codes, &q_avg_sq_.codes})
      if (t->scalar_type() != torch::kUInt8)
        throw RuntimeFailure("optimizer state for '" + name + "': 8-bit moments must be uint8");
  } else {
    exp_avg_ = host("exp_avg", shape.vec());
    exp_avg_sq_ = host("exp_avg_sq", shape.vec());
  }
  return true;
}

int64_t AdamMoments::state_bytes() const {
  int64_t b = 0;
  for (const auto* t : {&exp_avg_, &exp_avg_sq_, &q_avg_.codes, &q_avg_.absmax, &q_avg_sq_.codes, &q_avg_sq_.absmax})
    b += tensor_bytes(*t);
  return b;
}

}  // namespace hftrain
