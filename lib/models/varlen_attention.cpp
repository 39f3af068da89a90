// Flash attention's variable-length entry through the dispatcher (see varlen_attention.h).
#include "models/varlen_attention.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <string>

#include "kernels/kernel_choice.h"
#include "log/logger.h"

namespace hftrain {
namespace {

// aten::_flash_attention_forward, when this LibTorch registers it.
const c10::OperatorHandle* flash_forward() {
  static const auto handle = c10::Dispatcher::singleton().findSchema({"aten::_flash_attention_forward", ""});
  return handle ? &*handle : nullptr;
}

// Set when the op refused a call (a GPU older than flash's Ampere, a PyTorch built without flash): the rows
// then attend example by example for the rest of the run, said once.
std::atomic<bool> refused{false};

bool has_argument(const c10::OperatorHandle& op, const std::string& name) {
  const auto& arguments = op.schema().arguments();
  return std::any_of(arguments.begin(), arguments.end(), [&](const c10::Argument& a) { return a.name() == name; });
}

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

bool applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  const c10::OperatorHandle* op = flash_forward();
  if (op == nullptr || refused.load() || !kernels::fused_kernels_enabled() || !q.is_cuda()) return false;
  const auto dtype = q.scalar_type();
  if ((dtype != torch::kBFloat16 && dtype != torch::kHalf) || k.scalar_type() != dtype || v.scalar_type() != dtype)
    return false;
  if (q.dim() != 4 || k.dim() != 4 || q.size(0) != 1) return false;
  const int64_t head_dim = q.size(3);
  if (head_dim % 8 != 0 || head_dim > 256 || k.size(1) == 0 || q.size(1) % k.size(1) != 0) return false;
  return scale <= 0 || has_argument(*op, "scale");
}

}  // namespace

bool varlen_flash_available() { return flash_forward() != nullptr; }

torch::Tensor varlen_flash_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::vector<int64_t>& segments, double dropout_p, double scale) {
  int64_t total = 0;
  for (const int64_t n : segments) total += n;
  if (!applies(q, k, v, scale) || total != q.size(2)) return {};  // lengths that do not fill the row: attend_packed names them
  // [1, heads, T, D] -> [T, heads, D], the varlen layout (the tokens of every example one after the other).
  auto tokens_first = [](const torch::Tensor& t) { return t[0].transpose(0, 1).contiguous(); };
  const torch::Tensor cumulative = cumulative_lengths(segments, q.device());
  const int64_t longest = segments.empty() ? 0 : *std::max_element(segments.begin(), segments.end());
  const std::map<std::string, c10::IValue> given = {
      {"query", tokens_first(q)},     {"key", tokens_first(k)},     {"value", tokens_first(v)},
      {"cum_seq_q", cumulative},      {"cum_seq_k", cumulative},    {"max_q", longest},
      {"max_k", longest},             {"dropout_p", dropout_p},     {"is_causal", true},
      {"return_debug_mask", false}};
  const c10::OperatorHandle& op = *flash_forward();
  torch::jit::Stack stack;
  for (const c10::Argument& argument : op.schema().arguments()) {
    if (auto it = given.find(argument.name()); it != given.end()) {
      stack.push_back(it->second);
    } else if (argument.name() == "scale" && scale > 0) {
      stack.emplace_back(scale);
    } else if (argument.default_value()) {
      stack.push_back(*argument.default_value());
    } else {
      return {};  // a signature this code does not know: attend example by example
    }
  }
  try {
    op.callBoxed(stack);
  } catch (const c10::Error& e) {
    if (!refused.exchange(true))
      log_warning(std::string("padding-free attention: flash attention's variable-length entry refused the call (") +
                  e.what_without_backtrace() + "); packed rows attend example by example from now on");
    return {};
  }
  kernels::count_fused_call(kernels::FusedKernel::kVarlenAttention);
  return stack.front().toTensor().transpose(0, 1).unsqueeze(0);  // [T, heads, D] -> [1, heads, T, D]
}

}  // namespace hftrain
