// The optimizer kernels: one streaming pass per parameter over plain float / 16-bit arrays in host memory, or on a
// CUDA device (Stream::on_cuda: optim/kernels/cuda/, where the build has them) (no torch types,
// so this header is cheap to include). Each update reads the gradient (fp32, bf16 or fp16) multiplied by
// `grad_scale` as it is loaded (clip coefficient / loss scale), updates the fp32 parameter and its fp32 state in
// place and, when `out16` is set, writes the new parameter rounded to bf16 / fp16 (round to nearest even) in the
// same pass. The work is split across the intra-op threads in chunks that fit the L2 cache; the instruction set
// (AVX-512, AVX2+FMA, NEON or scalar) is picked at run time from the CPU, or forced with HFTRAIN_OPTIM_ISA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {
namespace optim_kernels {

enum class ElementType { kF32, kBF16, kF16 };

// One parameter's stream. Pointers must not alias each other.
struct Stream {
  float* param = nullptr;      // fp32 parameter (or master weights), updated in place
  const void* grad = nullptr;  // gradient, of grad_type
  ElementType grad_type = ElementType::kF32;
  uint16_t* out16 = nullptr;   // optional: the updated parameter rounded to out_type (kBF16 or kF16)
  ElementType out_type = ElementType::kBF16;
  float grad_scale = 1.0f;     // multiplies every gradient element as it is loaded
  int64_t n = 0;
  bool on_cuda = false;        // the pointers (state included) are a CUDA device's, the current one: the CUDA kernels run it
  int cuda_device = -1;        // that device's index
};

// torch.optim.Adam / AdamW (1.13 single-tensor formula): p *= decay; g += l2*p; m = beta1*m + (1-beta1)*g;
// v = beta2*v + (1-beta2)*g*g; p -= step_size * m / (sqrt(v) * inv_bias_correction2_sqrt + eps).
struct AdamCoef {
  float decay = 1.0f;  // AdamW: 1 - lr*wd
  float l2 = 0.0f;     // Adam: wd
  float beta1 = 0.9f, beta2 = 0.999f, one_minus_beta1 = 0.1f, one_minus_beta2 = 0.001f;
  float step_size = 0.0f;                  // lr / (1 - beta1^t)
  float inv_bias_correction2_sqrt = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float eps = 1e-8f;
};

// torch.optim.SGD: d = g + wd*p; with momentum: buf = first ? d : momentum*buf + (1-dampening)*d,
// d = nesterov ? d + momentum*buf : buf; p -= lr*d.
struct SgdCoef {
  float lr = 0.0f, weight_decay = 0.0f, momentum = 0.0f, one_minus_dampening = 1.0f;
  bool nesterov = false;
  bool first = false;  // the momentum buffer is created by this step (buf = d)
};

// Lion: c = beta1*m + (1-beta1)*g; p *= decay; p -= lr*sign(c); m = beta2*m + (1-beta2)*g.
struct LionCoef {
  float lr = 0.0f, decay = 1.0f, beta1 = 0.9f, one_minus_beta1 = 0.1f, beta2 = 0.99f, one_minus_beta2 = 0.01f;
};

// torch.optim.Adagrad: g += wd*p; sum += g*g; p -= clr * g / (sqrt(sum) + eps), clr = lr / (1 + (t-1)*lr_decay).
struct AdagradCoef {
  float clr = 0.0f, weight_decay = 0.0f, eps = 1e-10f;
};

void adam_update(const Stream& s, float* exp_avg, float* exp_avg_sq, const AdamCoef& c);
void sgd_update(const Stream& s, float* momentum_buffer, const SgdCoef& c);  // buffer: nullptr when momentum is 0
void lion_update(const Stream& s, float* exp_avg, const LionCoef& c);
void adagrad_update(const Stream& s, float* state_sum, const AdagradCoef& c);

// The instruction set the updates use now: "avx512", "avx2+fma", "neon" or "scalar".
std::string active_isa();
// Every instruction set this build has and this CPU runs, best first.
std::vector<std::string> supported_isas();
// Forces an instruction set (one of supported_isas(), else RuntimeFailure naming it);
// "" returns to the automatic choice (HFTRAIN_OPTIM_ISA, else the best supported).
void set_isa(const std::string& name);
// "avx2+fma, 2 threads": for the run-start block.
std::string describe_kernels();

// Whether the CUDA updates run here: built (a CUDA LibTorch and nvcc when configured) and loadable on the device
// (kernels::cuda_kernels_unusable names why not).
bool cuda_updates_usable();

}  // namespace optim_kernels
}  // namespace hftrain
