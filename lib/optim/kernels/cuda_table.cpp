// The CUDA optimizer updates as a KernelTable (see kernel_table.h): optim/kernels/cuda/'s launchers given the current
// CUDA stream, errors as RuntimeFailure naming the update (kernels/cuda_launch.h). Compiled with the launchers only
// where lib/CMakeLists.txt built the CUDA kernels (HFTRAIN_WITH_CUDA_KERNELS) and where they load on the device;
// elsewhere there is no CUDA table.
#include "optim/kernels/kernel_table.h"

#include "kernels/cuda_launch.h"

#if HFTRAIN_WITH_CUDA_KERNELS
#include "optim/kernels/cuda/launch.h"
#endif

namespace hftrain {
namespace optim_kernels {

#if HFTRAIN_WITH_CUDA_KERNELS
namespace {

void* current_stream() { return kernels::current_cuda_stream(); }

void check(int code, const char* update) {
  kernels::check_cuda_launch(code, code != 0 ? cuda::error_text(code) : "", std::string("optimizer update ") + update);
}

}  // namespace

const KernelTable* cuda_table() {
  static const KernelTable table{
      "cuda",
      [](const Stream& s, float* m, float* v, const AdamCoef& c) {
        check(cuda::adam_update(s, m, v, c, current_stream()), "adam");
      },
      [](const Stream& s, float* buf, const SgdCoef& c) { check(cuda::sgd_update(s, buf, c, current_stream()), "sgd"); },
      [](const Stream& s, float* m, const LionCoef& c) { check(cuda::lion_update(s, m, c, current_stream()), "lion"); },
      [](const Stream& s, float* sum, const AdagradCoef& c) {
        check(cuda::adagrad_update(s, sum, c, current_stream()), "adagrad");
      }};
  return kernels::cuda_kernels_unusable().empty() ? &table : nullptr;
}
#else
const KernelTable* cuda_table() { return nullptr; }
#endif

}  // namespace optim_kernels
}  // namespace hftrain
