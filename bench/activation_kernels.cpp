// Micro-benchmark of the fused GELU kernels (kernels/activation.h) against LibTorch's gelu on one thread:
// ns per element of forward and backward, in both forms, on every instruction set this CPU runs (medians of 5
// timings of 200 calls over 393,216 elements, nanoGPT's MLP activations of one layer).
//   build/activation_kernels_bench
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/activation.h"
#include "kernels/kernel_choice.h"

namespace {

template <class Fn>
double median_ns_per_element(Fn fn, int64_t n) {
  std::vector<double> samples;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) fn();
    samples.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / 200 / n);
  }
  std::sort(samples.begin(), samples.end());
  return samples[2];
}

}  // namespace

int main() {
  namespace k = hftrain::kernels;
  at::set_num_threads(1);
  const int64_t n = 768 * 512;
  torch::manual_seed(0);
  auto x = torch::randn({n}) * 2, y = torch::empty({n}), dy = torch::randn({n}), dx = torch::empty({n});
  for (const char* form_name : {"none", "tanh"}) {
    const k::GeluForm form = std::string(form_name) == "tanh" ? k::GeluForm::kTanh : k::GeluForm::kErf;
    const double torch_forward = median_ns_per_element([&] { y = torch::gelu(x, form_name); }, n);
    const double torch_backward = median_ns_per_element([&] { dx = torch::gelu_backward(dy, x, form_name); }, n);
    std::printf("gelu %-4s torch ops       forward %.3f  backward %.3f ns/element\n", form_name, torch_forward, torch_backward);
    for (const std::string& isa : k::model_kernel_isas()) {
      k::set_model_kernel_isa(isa);
      const double forward = median_ns_per_element([&] { k::gelu_forward(x.data_ptr<float>(), y.data_ptr<float>(), n, form); }, n);
      const double backward = median_ns_per_element(
          [&] { k::gelu_backward(x.data_ptr<float>(), y.data_ptr<float>(), dy.data_ptr<float>(), dx.data_ptr<float>(), n, form); },
          n);
      std::printf("gelu %-4s fused %-8s forward %.3f  backward %.3f ns/element\n", form_name, isa.c_str(), forward, backward);
    }
    k::set_model_kernel_isa("");
  }
}
