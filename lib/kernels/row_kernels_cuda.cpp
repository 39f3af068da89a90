// The CUDA set of fused row kernels (see row_kernels.h): kernels/cuda/'s launchers given the current CUDA stream,
// the backward passes' workspace (from LibTorch's caching allocator, ordered on that stream) and errors as
// RuntimeFailure naming the kernel. Compiled with the launchers only where lib/CMakeLists.txt built kernels/cuda/
// (HFTRAIN_WITH_CUDA_KERNELS) and where they load on the device (cuda_kernels_unusable); elsewhere there is no CUDA set.
#include "kernels/row_kernels.h"

#include "kernels/cuda_launch.h"

#if HFTRAIN_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/launch.h"
#include "util/error.h"
#endif

namespace hftrain {
namespace kernels {

#if HFTRAIN_WITH_CUDA_KERNELS
void* current_cuda_stream() { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); }

const std::string& cuda_kernels_unusable() {
  static const std::string reason = [] {
    const int code = cuda::kernels_loadable();
    return code == 0 ? std::string()
                     : std::string("the CUDA kernels cannot load on this device: ") + cuda::error_text(code);
  }();
  return reason;
}

void check_cuda_launch(int code, const char* error_text, const std::string& what) {
  if (code != 0) throw RuntimeFailure("CUDA kernel " + what + ": " + error_text);
}

namespace {

cuda::Stream current_stream() { return current_cuda_stream(); }

torch::TensorOptions on_current_device(torch::ScalarType dtype) {
  return torch::TensorOptions().dtype(dtype).device(torch::kCUDA, c10::cuda::current_device());
}

void check(int code, const char* kernel) { check_cuda_launch(code, code != 0 ? cuda::error_text(code) : "", kernel); }

// Partial sums of a norm's backward: `per_block` rows of cols floats per block (0 when no dw is wanted).
torch::Tensor norm_workspace(int64_t rows, int64_t cols, int64_t per_block) {
  return torch::empty({std::max<int64_t>(1, cuda::norm_backward_blocks(rows) * cols * per_block)},
                      on_current_device(torch::kFloat));
}

void layer_norm_forward_cuda(const float* x, const float* residual, float* sum, const float* w, const float* b, float* y,
                             float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  check(cuda::layer_norm_forward(x, residual, sum, w, b, y, mean, rstd, rows, cols, eps, current_stream()),
        "layer_norm_forward");
}

void layer_norm_backward_cuda(const float* x, const float* w, const float* dy, const float* d_sum, const float* mean,
                              const float* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t cols) {
  torch::Tensor ws = norm_workspace(rows, cols, 2);
  check(cuda::layer_norm_backward(x, w, dy, d_sum, mean, rstd, dx, dw, db, ws.data_ptr<float>(), rows, cols,
                                  current_stream()),
        "layer_norm_backward");
}

void rms_norm_forward_cuda(const float* x, const float* residual, float* sum, const float* w, float* y, float* rstd,
                           int64_t rows, int64_t cols, float eps) {
  check(cuda::rms_norm_forward(x, residual, sum, w, y, rstd, rows, cols, eps, current_stream()), "rms_norm_forward");
}

void rms_norm_backward_cuda(const float* x, const float* w, const float* dy, const float* d_sum, const float* rstd,
                            float* dx, float* dw, int64_t rows, int64_t cols) {
  torch::Tensor ws = norm_workspace(rows, cols, dw != nullptr ? 1 : 0);
  check(cuda::rms_norm_backward(x, w, dy, d_sum, rstd, dx, dw, ws.data_ptr<float>(), rows, cols, current_stream()),
        "rms_norm_backward");
}

void rms_norm_forward_bf16_cuda(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t rows,
                                int64_t cols, float eps) {
  check(cuda::rms_norm_forward_bf16(x, w, y, rstd, rows, cols, eps, current_stream()), "rms_norm_forward_bf16");
}

void rms_norm_backward_bf16_cuda(const uint16_t* x, const uint16_t* w, const uint16_t* dy, const float* rstd,
                                 uint16_t* dx, uint16_t* dw, int64_t rows, int64_t cols) {
  torch::Tensor ws = norm_workspace(rows, cols, dw != nullptr ? 1 : 0);
  check(cuda::rms_norm_backward_bf16(x, w, dy, rstd, dx, dw, ws.data_ptr<float>(), rows, cols, current_stream()),
        "rms_norm_backward_bf16");
}

void gelu_forward_cuda(const float* x, float* y, int64_t n, GeluForm form) {
  check(cuda::gelu_forward(x, y, n, form, current_stream()), "gelu_forward");
}

// The host kernel reads the gate back from y; the CUDA one evaluates it again from x.
void gelu_backward_cuda(const float* x, const float* /*y*/, const float* dy, float* dx, int64_t n, GeluForm form) {
  check(cuda::gelu_backward(x, dy, dx, n, form, current_stream()), "gelu_backward");
}

void gelu_forward_bf16_cuda(const uint16_t* x, uint16_t* y, int64_t n, GeluForm form) {
  check(cuda::gelu_forward_bf16(x, y, n, form, current_stream()), "gelu_forward_bf16");
}

void gelu_backward_bf16_cuda(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, GeluForm form) {
  check(cuda::gelu_backward_bf16(x, dy, dx, n, form, current_stream()), "gelu_backward_bf16");
}

void swiglu_forward_cuda(const float* g, const float* u, float* y, int64_t n) {
  check(cuda::swiglu_forward(g, u, y, n, current_stream()), "swiglu_forward");
}

void swiglu_backward_cuda(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n) {
  check(cuda::swiglu_backward(g, u, dy, dg, du, n, current_stream()), "swiglu_backward");
}

void swiglu_forward_bf16_cuda(const uint16_t* g, const uint16_t* u, uint16_t* y, int64_t n) {
  check(cuda::swiglu_forward_bf16(g, u, y, n, current_stream()), "swiglu_forward_bf16");
}

void swiglu_backward_bf16_cuda(const uint16_t* g, const uint16_t* u, const uint16_t* dy, uint16_t* dg, uint16_t* du,
                               int64_t n) {
  check(cuda::swiglu_backward_bf16(g, u, dy, dg, du, n, current_stream()), "swiglu_backward_bf16");
}

// A label outside the vocabulary is named as the host kernel names it. Reading the kernel's verdict back waits for
// the kernel, so it is read only when the caller has not checked the labels on the host (labels_checked).
void cross_entropy_rows_cuda(const CrossEntropyRows& p, float* row_loss) {
  torch::Tensor bad_row = torch::full({1}, -1, on_current_device(torch::kLong));  // all bits set: no bad row
  check(cuda::cross_entropy_rows(p, row_loss, reinterpret_cast<unsigned long long*>(bad_row.data_ptr<int64_t>()),
                                 current_stream()),
        "cross_entropy_rows");
  if (p.labels_checked) return;
  const int64_t row = bad_row.item<int64_t>();
  if (row < 0) return;
  const torch::Tensor labels = torch::from_blob(const_cast<int64_t*>(p.labels), {p.rows}, on_current_device(torch::kLong));
  throw std::out_of_range(label_outside_vocabulary(row, labels[row].item<int64_t>(), p.vocab));
}

void dequantize_4bit_cuda(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                          int64_t end, float* out) {
  check(cuda::dequantize_4bit(packed, absmax, code, block, begin, end, out, current_stream()), "dequantize_4bit");
}

void dequantize_4bit_bf16_cuda(const uint8_t* packed, const float* absmax, const float* code, int64_t block,
                               int64_t begin, int64_t end, uint16_t* out) {
  check(cuda::dequantize_4bit_bf16(packed, absmax, code, block, begin, end, out, current_stream()),
        "dequantize_4bit_bf16");
}

void dequantize_8bit_blockwise_cuda(const uint8_t* codes, int64_t n, int64_t block, const float* map,
                                    const float* absmax, float offset, float* out) {
  check(cuda::dequantize_8bit_blockwise(codes, n, block, map, absmax, offset, out, current_stream()),
        "dequantize_8bit_blockwise");
}

void rotary_rows_cuda(const RotaryRows& p) { check(cuda::rotary_rows(p, current_stream()), "rotary_rows"); }

}  // namespace

const RowKernels* cuda_row_kernels() {
  static const RowKernels cuda_set{"cuda",
                                   &layer_norm_forward_cuda,
                                   &layer_norm_backward_cuda,
                                   &rms_norm_forward_cuda,
                                   &rms_norm_backward_cuda,
                                   &rms_norm_forward_bf16_cuda,
                                   &rms_norm_backward_bf16_cuda,
                                   &gelu_forward_cuda,
                                   &gelu_backward_cuda,
                                   &gelu_forward_bf16_cuda,
                                   &gelu_backward_bf16_cuda,
                                   &swiglu_forward_cuda,
                                   &swiglu_backward_cuda,
                                   &swiglu_forward_bf16_cuda,
                                   &swiglu_backward_bf16_cuda,
                                   &cross_entropy_rows_cuda,
                                   &dequantize_4bit_cuda,
                                   &dequantize_4bit_bf16_cuda,
                                   &dequantize_8bit_blockwise_cuda,
                                   &rotary_rows_cuda};
  return cuda_kernels_unusable().empty() ? &cuda_set : nullptr;
}
#else
const std::string& cuda_kernels_unusable() {
  static const std::string reason = "no CUDA kernels in this build";
  return reason;
}

const RowKernels* cuda_row_kernels() { return nullptr; }
#endif

}  // namespace kernels
}  // namespace hftrain
