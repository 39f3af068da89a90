// Inputs of one parameter's update (see step_tensors.h).
#include "optim/step_tensors.h"

#include "kernels/cuda_launch.h"

namespace hftrain {
namespace {

// Contiguous, in the memory `like` is in (a stream's: host, or a CUDA device where the CUDA updates run).
bool kernel_memory(const torch::Tensor& t, const torch::Tensor& like) {
  const auto& d = like.device();
  return t.device() == d && t.is_contiguous() && (d.is_cpu() || (d.is_cuda() && optim_kernels::cuda_updates_usable()));
}

bool element_type(torch::ScalarType type, optim_kernels::ElementType* out) {
  switch (type) {
    case torch::kFloat: *out = optim_kernels::ElementType::kF32; return true;
    case torch::kBFloat16: *out = optim_kernels::ElementType::kBF16; return true;
    case torch::kHalf: *out = optim_kernels::ElementType::kF16; return true;
    default: return false;
  }
}

bool same_cuda_device(const torch::Tensor& t, const optim_kernels::Stream& stream) {
  return t.device().index() == stream.cuda_device;
}

}  // namespace

StepTensors step_tensors(const ParamGroup& group, std::size_t i) {
  StepTensors t;
  if (i < group.grads16.size() && group.grads16[i].defined()) t.grad = group.grads16[i];
  else t.grad = group.params[i].grad();
  if (i < group.params16.size()) t.out16 = group.params16[i];
  return t;
}

bool kernel_state(const torch::Tensor& state, const optim_kernels::Stream& stream) {
  return state.defined() && state.is_contiguous() && state.scalar_type() == torch::kFloat &&
         (stream.on_cuda ? state.device().is_cuda() && same_cuda_device(state, stream)
                         : state.device().is_cpu());
}

bool kernel_stream(const torch::Tensor& param, const StepTensors& t, double grad_scale, optim_kernels::Stream* stream) {
  optim_kernels::Stream s;
  if (!param.defined() || param.scalar_type() != torch::kFloat || !kernel_memory(param, param) ||
      !kernel_memory(t.grad, param) || t.grad.numel() != param.numel() || !element_type(t.grad.scalar_type(), &s.grad_type))
    return false;
  if (t.out16.defined()) {
    if (!kernel_memory(t.out16, param) || t.out16.numel() != param.numel() ||
        !element_type(t.out16.scalar_type(), &s.out_type) || s.out_type == optim_kernels::ElementType::kF32)
      return false;
    s.out16 = static_cast<uint16_t*>(t.out16.data_ptr());
  }
  s.param = param.data_ptr<float>();
  s.grad = t.grad.data_ptr();
  s.grad_scale = static_cast<float>(grad_scale);
  s.n = param.numel();
  s.on_cuda = param.device().is_cuda();
  s.cuda_device = s.on_cuda ? param.device().index() : -1;
  *stream = s;
  return true;
}

std::string kernel_description(const std::vector<ParamGroup>& groups) {
  for (const auto& group : groups)
    for (const auto& param : group.params)
      if (param.defined() && param.device().is_cuda())
        return optim_kernels::cuda_updates_usable() ? "CUDA kernels, one pass per parameter"
                                                    : "LibTorch's ops on the GPU (" + kernels::cuda_kernels_unusable() + ")";
  return optim_kernels::describe_kernels();
}

torch::Tensor fp32_gradient(const torch::Tensor& grad, double grad_scale) {
  const bool half = grad.scalar_type() == torch::kBFloat16 || grad.scalar_type() == torch::kHalf;
  if (!half) return grad_scale == 1.0 ? grad : grad.mul(grad_scale);  // fp32 (or float64) as it is
  auto g = grad.to(torch::kFloat);
  if (grad_scale != 1.0) g.mul_(grad_scale);
  return g;
}

void write_out16(const StepTensors& t, const torch::Tensor& param) {
  if (t.out16.defined()) t.out16.copy_(param.detach().reshape(t.out16.sizes()));
}

}  // namespace hftrain
