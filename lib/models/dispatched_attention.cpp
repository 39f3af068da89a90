// PyTorch 2.x attention entries through the dispatcher by name (see dispatched_attention.h).
#include "models/dispatched_attention.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <string>

#include "kernels/kernel_choice.h"
#include "log/logger.h"

#if HFTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace hftrain {
namespace {

// The ops of this LibTorch by schema name (null where it has none), looked up once.
const c10::OperatorHandle* flash_forward() {
  static const auto op = c10::Dispatcher::singleton().findSchema({"aten::_flash_attention_forward", ""});
  return op ? &*op : nullptr;
}

const c10::OperatorHandle* sdpa() {
  static const auto op = c10::Dispatcher::singleton().findSchema({"aten::scaled_dot_product_attention", ""});
  return op ? &*op : nullptr;
}

bool has_argument(const c10::OperatorHandle& op, const std::string& name) {
  const auto& arguments = op.schema().arguments();
  return std::any_of(arguments.begin(), arguments.end(), [&](const c10::Argument& a) { return a.name() == name; });
}

// Calls `op` with the arguments in `given` by name and every other one at its default; returns its first output,
// or undefined when an argument without a default is not given (a signature this code does not know).
torch::Tensor call_by_name(const c10::OperatorHandle& op, const std::map<std::string, c10::IValue>& given) {
  torch::jit::Stack stack;
  for (const c10::Argument& argument : op.schema().arguments()) {
    if (auto it = given.find(argument.name()); it != given.end()) stack.push_back(it->second);
    else if (argument.default_value()) stack.push_back(*argument.default_value());
    else return {};
  }
  op.callBoxed(stack);
  return stack.front().toTensor();
}

// Set when the flash op refused a call: the rows then attend example by example for the rest of the run, said once.
std::atomic<bool> flash_refused{false};

// The examples' cumulative lengths [0, l0, l0 + l1, ...] as int32 on `device`: built on the host and copied from
// pinned memory without waiting, so the step does not wait for the device here.
torch::Tensor cumulative_lengths(const std::vector<int64_t>& segments, torch::Device device) {
  torch::Tensor host = torch::empty({static_cast<int64_t>(segments.size()) + 1},
                                    torch::TensorOptions(torch::kInt32).pinned_memory(true));
  int32_t* out = host.data_ptr<int32_t>();
  int64_t total = 0;
  out[0] = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) out[i + 1] = static_cast<int32_t>(total += segments[i]);
  return host.to(device, /*non_blocking=*/true);
}

// Flash attention's own limits: an Ampere or newer GPU (compute capability 8), head sizes a multiple of 8 up to 256.
bool flash_runs(const torch::Tensor& q) {
  if (q.size(3) % 8 != 0 || q.size(3) > 256) return false;
#if HFTRAIN_WITH_CUDA
  return at::cuda::getDeviceProperties(q.device().index())->major >= 8;
#else
  return false;
#endif
}

// What both entries ask of q, k, v: CUDA, 16-bit, 4-D, H a multiple of KV, the fused paths on, flash able to run
// (where it cannot, SDPA would take its math path for grouped heads, slower than repeating them for the
// memory-efficient kernel).
bool sixteen_bit_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!kernels::fused_kernels_enabled() || !q.is_cuda() || q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  const auto dtype = q.scalar_type();
  if ((dtype != torch::kBFloat16 && dtype != torch::kHalf) || k.scalar_type() != dtype || v.scalar_type() != dtype)
    return false;
  return k.size(1) > 0 && q.size(1) % k.size(1) == 0 && flash_runs(q);
}

}  // namespace

bool varlen_flash_available() { return flash_forward() != nullptr; }

bool sdpa_gqa_available() { return sdpa() != nullptr && has_argument(*sdpa(), "enable_gqa"); }

torch::Tensor varlen_flash_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::vector<int64_t>& segments, double dropout_p, double scale) {
  const c10::OperatorHandle* op = flash_forward();
  if (op == nullptr || flash_refused.load() || !sixteen_bit_heads(q, k, v) || q.size(0) != 1) return {};
  if (scale > 0 && !has_argument(*op, "scale")) return {};
  int64_t total = 0;
  for (const int64_t n : segments) total += n;
  if (total != q.size(2)) return {};  // lengths that do not fill the row: attend_packed names them
  // [1, heads, T, D] -> [T, heads, D], the varlen layout (the tokens of every example one after the other).
  auto tokens_first = [](const torch::Tensor& t) { return t[0].transpose(0, 1).contiguous(); };
  const torch::Tensor cumulative = cumulative_lengths(segments, q.device());
  const int64_t longest = segments.empty() ? 0 : *std::max_element(segments.begin(), segments.end());
  std::map<std::string, c10::IValue> given = {
      {"query", tokens_first(q)},  {"key", tokens_first(k)},  {"value", tokens_first(v)},
      {"cum_seq_q", cumulative},   {"cum_seq_k", cumulative}, {"max_q", longest},
      {"max_k", longest},          {"dropout_p", dropout_p},  {"is_causal", true},
      {"return_debug_mask", false}};
  if (scale > 0) given["scale"] = scale;
  torch::Tensor out;
  try {
    out = call_by_name(*op, given);
  } catch (const c10::Error& e) {
    if (!flash_refused.exchange(true))
      log_warning(std::string("padding-free attention: flash attention's variable-length entry refused the call (") +
                  e.what_without_backtrace() + "); packed rows attend example by example from now on");
    return {};
  }
  if (!out.defined()) return {};
  kernels::count_fused_call(kernels::FusedKernel::kVarlenAttention);
  return out.transpose(0, 1).unsqueeze(0);  // [T, heads, D] -> [1, heads, T, D]
}

torch::Tensor gqa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double dropout_p) {
  if (!sdpa_gqa_available() || !sixteen_bit_heads(q, k, v) || q.size(2) != k.size(2)) return {};
  const torch::Tensor out = call_by_name(*sdpa(), {{"query", q}, {"key", k}, {"value", v}, {"dropout_p", dropout_p},
                                                   {"is_causal", true}, {"enable_gqa", true}});
  if (out.defined()) kernels::count_fused_call(kernels::FusedKernel::kGqaAttention);
  return out;
}

}  // namespace hftrain
