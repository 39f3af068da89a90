// SGD (see sgd.h): one pass in the optimizer kernels for contiguous CPU tensors, otherwise torch 1.13's
// _single_tensor_sgd op for op.
#include "optim/sgd.h"

#include "optim/step_tensors.h"
#include "util/error.h"

namespace hftrain {

void Sgd::Options::declare(Schema<Options>& s) {
  s.add("momentum", &Options::momentum, "Momentum factor (0 = plain SGD).").min(0);
  s.add("dampening", &Options::dampening, "Dampening for momentum: buf = momentum*buf + (1-dampening)*g.").min(0);
  s.add("nesterov", &Options::nesterov, "Nesterov momentum (needs momentum > 0 and dampening 0).");
}

Sgd::Sgd(const Options& options, std::vector<ParamGroup> groups, const OptimizerHyper&)
    : options_(options), groups_(std::move(groups)) {
  // torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening".
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0))
    throw ConfigError("optimizer.nesterov: Nesterov momentum requires momentum > 0 and dampening 0 (got momentum " +
                      format_number(options_.momentum) + ", dampening " + format_number(options_.dampening) + ")");
}

void Sgd::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  const double momentum = options_.momentum;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      const StepTensors in = step_tensors(group, i);
      if (!in.grad.defined()) continue;
      optim_kernels::Stream stream;
      if (kernel_stream(param, in, scaling.grad_scale, &stream)) {
        torch::Tensor* buf = momentum != 0 ? &momentum_buffer_[group.names[i]] : nullptr;
        const bool first = buf != nullptr && !buf->defined();
        if (first) *buf = torch::empty_like(param, torch::MemoryFormat::Contiguous);
        if (buf == nullptr || kernel_state(*buf, stream)) {
          optim_kernels::SgdCoef c;
          c.lr = static_cast<float>(lr);
          c.weight_decay = static_cast<float>(group.weight_decay);
          c.momentum = static_cast<float>(momentum);
          c.one_minus_dampening = static_cast<float>(1 - options_.dampening);
          c.nesterov = options_.nesterov;
          c.first = first;
          optim_kernels::sgd_update(stream, buf != nullptr ? buf->data_ptr<float>() : nullptr, c);
          continue;
        }
      }
      torch::Tensor d_p = fp32_gradient(in.grad, scaling.grad_scale);
      if (group.weight_decay != 0) d_p = d_p.add(param, group.weight_decay);
      if (momentum != 0) {
        torch::Tensor& buf = momentum_buffer_[group.names[i]];
        if (!buf.defined()) {
          buf = d_p.clone().detach();
        } else {
          buf.mul_(momentum).add_(d_p, 1 - options_.dampening);
        }
        d_p = options_.nesterov ? d_p.add(buf, momentum) : buf;
      }
      param.add_(d_p, -lr);
      write_out16(in, param);
    }
  }
}

std::string Sgd::kernel_description() const { return hftrain::kernel_description(groups_); }

std::map<std::string, torch::Tensor> Sgd::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, buf] : momentum_buffer_) out[name + ".momentum_buffer"] = buf;
  return out;
}

void Sgd::load_state(const std::map<std::string, torch::Tensor>& state) {
  momentum_buffer_.clear();
  for (auto& group : groups_)
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      torch::Tensor buf = find_state(state, group.names[i], "momentum_buffer", group.params[i].sizes());
      if (buf.defined()) momentum_buffer_[group.names[i]] = buf;
    }
}

}  // namespace hftrain
