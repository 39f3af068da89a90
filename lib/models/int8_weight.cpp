// LLM.int8(): row-wise int8 weights and the decomposed product over them (see int8_weight.h).
#include "models/int8_weight.h"

#include <algorithm>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/gemm.h"
#include "util/autocast.h"
#include "util/error.h"

namespace hftrain {
namespace {

constexpr int64_t kExactColumns = 1024;  // 1024 * 127 * 127 < 2^24: a float32 sum of that many int8 products is exact
constexpr float kInt8Max = 127.0f;

// round(v * (127 / absmax_row)) of each row of v (float32 [rows, cols]), half to even; a zero row gives 0.
torch::Tensor row_codes(const torch::Tensor& v, const torch::Tensor& absmax) {
  const torch::Tensor inverse = torch::where(absmax > 0, kInt8Max / absmax, torch::zeros_like(absmax));
  return torch::round(v * inverse.unsqueeze(1));
}

// a [m, k] b [n, k]^T of int8 codes held as float32 values, exactly, as int32 [m, n].
torch::Tensor exact_int8_product(const torch::Tensor& a, const torch::Tensor& b) {
  const int64_t k = a.size(1);
  torch::Tensor sum = torch::zeros({a.size(0), b.size(0)}, a.options().dtype(torch::kInt));
  for (int64_t k0 = 0; k0 < k; k0 += kExactColumns) {
    const int64_t len = std::min(kExactColumns, k - k0);
    sum.add_(torch::mm(a.narrow(1, k0, len), b.narrow(1, k0, len).t()).to(torch::kInt));
  }
  return sum;
}

// a [m, k] b [n, k]^T of int8 codes (int8, contiguous rows) through oneDNN's int8 GEMM, as int32 [m, n].
torch::Tensor int8_gemm_product(const torch::Tensor& a, const torch::Tensor& weight_rows) {
  const torch::Tensor b = weight_rows.contiguous();
  torch::Tensor sum = torch::empty({a.size(0), b.size(0)}, a.options().dtype(torch::kInt));
  if (a.size(0) > 0 && b.size(0) > 0)
    kernels::gemm_s8s8s32_nt(a.size(0), b.size(0), a.size(1), a.data_ptr<int8_t>(), b.data_ptr<int8_t>(), sum.data_ptr<int32_t>());
  return sum;
}

// Weight rows a forward pass converts at a time (about quant_tile_elements() of them).
int64_t int8_tile_rows(const QuantizedWeight& w) {
  return std::clamp<int64_t>(quant_tile_elements() / std::max<int64_t>(w.in, 1), 1, std::max<int64_t>(w.out, 1));
}

// x2 [rows, in] (compute dtype) -> y2 [rows, out] in `dtype`: the int8 part, the bias, then the outlier columns.
torch::Tensor decomposed_product(const QuantizedWeight& w, const torch::Tensor& x2, const torch::Tensor& bias, torch::ScalarType dtype) {
  const Int8Activations a = quantize_int8_activations(x2, w.settings.threshold);
  torch::Tensor y = torch::empty({x2.size(0), w.out}, x2.options().dtype(torch::kFloat));
  // oneDNN's int8 GEMM takes the weight's codes as they are, in one product; else float32 tiles of rows
  const bool int8_gemm = x2.device().is_cpu() && kernels::int8_gemm_available();
  const torch::Tensor codes8 = int8_gemm ? a.codes.to(torch::kChar).contiguous() : torch::Tensor();
  const int64_t step = int8_gemm ? std::max<int64_t>(w.out, 1) : int8_tile_rows(w);
  for (int64_t r0 = 0; r0 < w.out; r0 += step) {
    const int64_t n = std::min(w.out - r0, step);
    const torch::Tensor sum = int8_gemm ? int8_gemm_product(codes8, w.packed.narrow(0, r0, n))
                                        : exact_int8_product(a.codes, w.packed.narrow(0, r0, n).to(torch::kFloat));
    const torch::Tensor scale = a.row_absmax.unsqueeze(1) * w.absmax.narrow(0, r0, n).unsqueeze(0);
    y.narrow(1, r0, n).copy_(sum.to(torch::kFloat).mul_(scale).div_(kInt8Max * kInt8Max));
  }
  if (bias.numel() > 0) y.add_(bias.to(torch::kFloat));
  y = y.to(dtype);
  if (a.outlier_columns.numel() > 0) {
    const torch::Tensor columns = w.packed.index_select(1, a.outlier_columns).to(torch::kFloat);
    const torch::Tensor sub_w = (columns * (w.absmax / kInt8Max).unsqueeze(1)).to(dtype);
    y.addmm_(x2.index_select(1, a.outlier_columns), sub_w.t());
  }
  return y;
}

std::vector<int64_t> sizes_with_last(c10::IntArrayRef sizes, int64_t last) {
  auto v = sizes.vec();
  v.back() = last;
  return v;
}

// One autograd operation; CB and SCB are saved for backward (the storage itself, no copy).
class Int8Linear : public torch::autograd::Function<Int8Linear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& bias,
                               const std::shared_ptr<const QuantizedWeight>& w) {
    const torch::ScalarType autocast = current_autocast_dtype();
    const torch::ScalarType dtype = autocast != torch::kFloat ? autocast : x.scalar_type();
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // the products' dtypes are chosen here
    const torch::Tensor x2 = x.reshape({-1, w->in}).to(dtype).contiguous();
    const torch::Tensor y2 = decomposed_product(*w, x2, bias, dtype);
    ctx->save_for_backward({w->packed, w->absmax});
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    const torch::Tensor y = y2.view(sizes_with_last(x.sizes(), w->out));
    return autocast != torch::kFloat || x.scalar_type() == dtype ? y : y.to(x.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    QuantizedWeight w;
    w.settings.bits = 8;
    w.packed = saved[0];
    w.absmax = saved[1];
    w.out = w.packed.size(0);
    w.in = w.packed.size(1);
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const torch::ScalarType sum_dtype = dtype == torch::kBFloat16 || dtype == torch::kHalf ? torch::kFloat : dtype;
    const torch::Tensor dy2 = grads[0].reshape({-1, w.out}).to(dtype).contiguous();
    torch::Tensor dx, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::zeros({dy2.size(0), w.in}, dy2.options().dtype(sum_dtype));
      const int64_t step = int8_tile_rows(w);
      for (int64_t r0 = 0; r0 < w.out; r0 += step) {
        const int64_t n = std::min(w.out - r0, step);
        dx.add_(torch::mm(dy2.narrow(1, r0, n), dequantize_int8_rows(w, r0, r0 + n, dtype)).to(sum_dtype));
      }
      dx = dx.to(x_dtype).view(sizes_with_last(grads[0].sizes(), w.in));
    }
    if (ctx->needs_input_grad(1) && ctx->saved_data["has_bias"].toBool()) db = dy2.to(sum_dtype).sum(0);
    return {dx, db, torch::Tensor()};
  }
};

}  // namespace

QuantizedWeight quantize_int8_rows(const torch::Tensor& weight_out_in, const QuantSettings& settings) {
  if (weight_out_in.dim() != 2) throw RuntimeFailure("8-bit quantisation: expected a [out, in] weight");
  QuantizedWeight q;
  q.settings = settings;
  q.out = weight_out_in.size(0);
  q.in = weight_out_in.size(1);
  q.source_dtype = weight_out_in.scalar_type();
  const auto options = torch::TensorOptions().device(weight_out_in.device());
  if (weight_out_in.is_meta()) {
    q.packed = torch::empty({q.out, q.in}, options.dtype(torch::kChar));
    q.absmax = torch::empty({q.out}, options.dtype(torch::kFloat));
    return q;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor w = weight_out_in.detach().to(torch::kFloat).contiguous();
  q.absmax = std::get<0>(w.abs().max(1)).contiguous();
  q.packed = row_codes(w, q.absmax).to(torch::kChar).contiguous();
  return q;
}

torch::Tensor dequantize_int8_rows(const QuantizedWeight& w, int64_t row0, int64_t row1, torch::ScalarType dtype) {
  const torch::Tensor codes = w.packed.narrow(0, row0, row1 - row0).to(torch::kFloat);
  const torch::Tensor values = codes * (w.absmax.narrow(0, row0, row1 - row0) / kInt8Max).unsqueeze(1);
  return values.scalar_type() == dtype ? values : values.to(dtype);
}

Int8Activations quantize_int8_activations(const torch::Tensor& x2, double threshold) {
  torch::NoGradGuard no_grad;
  torch::Tensor v = x2.to(torch::kFloat);
  Int8Activations a;
  a.outlier_columns = torch::empty({0}, x2.options().dtype(torch::kLong));
  if (threshold > 0) {
    const torch::Tensor outliers = v.abs() >= threshold;
    a.outlier_columns = outliers.any(0).nonzero().view({-1});
    if (a.outlier_columns.numel() > 0) v = v.masked_fill(outliers, 0.0);  // out of the rows' absmax
  }
  a.row_absmax = v.size(1) > 0 ? std::get<0>(v.abs().max(1)) : torch::zeros({v.size(0)}, v.options());
  a.codes = row_codes(v, a.row_absmax);
  if (a.outlier_columns.numel() > 0) a.codes.index_fill_(1, a.outlier_columns, 0.0);
  return a;
}

torch::Tensor int8_linear(const torch::Tensor& x, const std::shared_ptr<const QuantizedWeight>& weight, const torch::Tensor& bias) {
  return Int8Linear::apply(x, bias.defined() ? bias : torch::empty({0}, x.options()), weight);
}

}  // namespace hftrain
