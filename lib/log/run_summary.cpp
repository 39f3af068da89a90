// Run start block (see run_summary.h).
#include "log/run_summary.h"

#include "kernels/gemm.h"
#include "util/threads.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace {

std::string& compute_device() {
  static std::string device = "cpu";
  return device;
}

}  // namespace

void set_compute_device(const std::string& description) { compute_device() = description; }

std::string describe_compute() {
  const int threads = at::get_num_threads();
  return compute_device() + ", " + std::to_string(threads) + " intra-op thread" + (threads == 1 ? "" : "s") +
         " (BLAS: " + choose_threads(0, 1).blas + "; linear layers on the host: " + kernels::gemm_description() + ")";
}

std::string thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_training_summary(const TrainingSummary& s) {
  std::string t = "***** Running training *****\n";
  t += "  Num examples = " + thousands(s.num_examples) + "\n";
  t += "  Num epochs = " + thousands(s.num_epochs) + "\n";
  t += "  World size = " + thousands(s.world_size) + "\n";
  t += "  Batch size per device = " + thousands(s.per_device_batch_size) + "\n";
  t += "  Gradient accumulation steps = " + thousands(s.gradient_accumulation_steps) + "\n";
  t += "  Global batch size (per device x accumulation x world size) = " + thousands(s.global_batch_size) + "\n";
  t += "  Steps per epoch = " + thousands(s.steps_per_epoch) + " (" + thousands(s.batches_per_epoch) +
       " batches per device)\n";
  t += "  Total optimization steps = " + thousands(s.max_steps) + "\n";
  t += "  Warmup steps = " + thousands(s.warmup_steps) + "\n";
  t += "  Number of trainable parameters = " + thousands(s.parameters.trainable) + " (total " +
       thousands(s.parameters.total) + ")\n";
  t += "  Device = " + s.compute;
  return t;
}

std::string format_inference_summary(const std::string& title, int64_t num_examples, int64_t batch_size,
                                     const std::string& compute) {
  return "***** Running " + title + " *****\n  Num examples = " + thousands(num_examples) +
         "\n  Batch size = " + thousands(batch_size) + "\n  Device = " + compute;
}

}  // namespace hftrain
