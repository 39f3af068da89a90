// The model kernels' table for this CPU (see kernel_choice.h).
#include "kernels/kernel_choice.h"

#include "kernels/kernel_table.h"
#include "kernels/table_choice.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace hftrain {
namespace kernels {
namespace {

simd::TableChoice<ModelKernelTable>& choice() {
  static simd::TableChoice<ModelKernelTable> c(
      [] { return std::vector<const ModelKernelTable*>{avx512_model_kernels(), avx2_model_kernels(), scalar_model_kernels()}; },
      "HFTRAIN_KERNEL_ISA", "model kernels");
  return c;
}

std::atomic<int64_t>& call_counter(FusedKernel kernel) {
  static std::atomic<int64_t> counters[static_cast<int>(FusedKernel::kCount)] = {};
  return counters[static_cast<int>(kernel)];
}

std::atomic<int>& kernels_switch() {  // -1: not read yet
  static std::atomic<int> on{-1};
  return on;
}

}  // namespace

bool fused_kernels_enabled() {
  int on = kernels_switch().load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv("HFTRAIN_KERNELS");
    if (env == nullptr || *env == '\0' || std::strcmp(env, "fused") == 0) on = 1;
    else if (std::strcmp(env, "torch") == 0) on = 0;
    else throw ConfigError(std::string("HFTRAIN_KERNELS='") + env + "': expected 'fused' (the default) or 'torch'");
    kernels_switch().store(on);
  }
  return on == 1;
}

void set_fused_kernels_enabled(bool on) { kernels_switch().store(on ? 1 : 0); }

const ModelKernelTable* model_kernels() { return choice().current(); }

std::string model_kernel_isa() { return model_kernels()->name; }

std::vector<std::string> model_kernel_isas() { return choice().names(); }

void set_model_kernel_isa(const std::string& name) { choice().force(name); }

void count_fused_call(FusedKernel kernel) { call_counter(kernel).fetch_add(1, std::memory_order_relaxed); }

int64_t fused_calls(FusedKernel kernel) { return call_counter(kernel).load(std::memory_order_relaxed); }

}  // namespace kernels
}  // namespace hftrain
