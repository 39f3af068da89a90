// 4-bit weight storage, its dequantisation a tile of rows at a time, and the product over it (see
// quantized_weight.h).
#include "models/quantized_weight.h"

#include <algorithm>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/row_kernels.h"
#include "models/fused_linear.h"
#include "models/int8_weight.h"
#include "util/autocast.h"
#include "util/error.h"

namespace hftrain {
namespace {

constexpr int64_t kDefaultTileElements = 1 << 20;  // 4 MiB of float32 rows

int64_t& tile_setting() {
  static int64_t elements = kDefaultTileElements;
  return elements;
}

torch::Tensor float_table(const float* values, int64_t n) {
  return torch::from_blob(const_cast<float*>(values), {n}, torch::kFloat).clone();
}

// The code tables, one tensor each, shared by every weight on the host.
torch::Tensor code_table(kernels::Quant4Type type) {
  static const torch::Tensor nf4 = float_table(kernels::quant4_code_values(kernels::Quant4Type::kNf4), 16);
  static const torch::Tensor fp4 = float_table(kernels::quant4_code_values(kernels::Quant4Type::kFp4), 16);
  return type == kernels::Quant4Type::kNf4 ? nf4 : fp4;
}

torch::Tensor dynamic_map_table() {
  static const torch::Tensor map = float_table(kernels::dynamic_map_signed(), 256);
  return map;
}

// The dequantisation kernels of a memory: the host's always (whatever HFTRAIN_KERNELS says, as before the CUDA
// kernels existed), a CUDA device's where built and the fused kernels are on; null: LibTorch's ops.
const kernels::RowKernels* dequantizing_kernels(const torch::Device& device) {
  return device.is_cpu() ? &kernels::host_row_kernels() : kernels::row_kernels_on(device);
}

// Elements [begin, end) through LibTorch's ops: any device.
torch::Tensor dequantize_with_ops(const QuantizedWeight& w, int64_t begin, int64_t end, const torch::Tensor& absmax) {
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(w.packed.device());
  const torch::Tensor index = torch::arange(begin, end, options);
  const torch::Tensor bytes = w.packed.view({-1}).index_select(0, torch::div(index, 2, "floor")).to(torch::kLong);
  const torch::Tensor codes = torch::where(torch::remainder(index, 2).eq(1), bytes.bitwise_and(15), bytes.bitwise_right_shift(4));
  const torch::Tensor scale = absmax.to(w.packed.device()).index_select(0, torch::div(index, w.settings.blocksize, "floor"));
  return w.quant_map.to(w.packed.device()).index_select(0, codes) * scale;
}

// The tile height for weights of `in` columns.
int64_t tile_rows(int64_t in, int64_t out) { return std::clamp<int64_t>(quant_tile_elements() / std::max<int64_t>(in, 1), 1, std::max<int64_t>(out, 1)); }

// The compute dtype of a product now: autocast's when it is on, else the weight's compute_dtype.
torch::ScalarType product_dtype(const QuantizedWeight& w) {
  const torch::ScalarType autocast = current_autocast_dtype();
  return autocast != torch::kFloat ? autocast : w.settings.compute_dtype;
}

// x2 [rows, in] W^T -> y2 [rows, out], a tile of W's rows at a time.
void product_forward(const QuantizedWeight& w, const torch::Tensor& x2, const torch::Tensor& absmax, torch::Tensor& y2) {
  const int64_t step = tile_rows(w.in, w.out);
  for (int64_t r0 = 0; r0 < w.out; r0 += step) {
    const int64_t r1 = std::min(w.out, r0 + step);
    const torch::Tensor tile = w.dequantize_rows(r0, r1, x2.scalar_type(), absmax);
    if (r1 - r0 == w.out) {
      matmul_into(y2, x2, false, tile, true, 0.0f);
      return;
    }
    torch::Tensor part = torch::empty({x2.size(0), r1 - r0}, y2.options());
    matmul_into(part, x2, false, tile, true, 0.0f);
    y2.narrow(1, r0, r1 - r0).copy_(part);
  }
}

// The dtype sums over tiles accumulate in: float32 for 16-bit products, else the product's own.
torch::ScalarType accumulation_dtype(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 || dtype == torch::kHalf ? torch::kFloat : dtype;
}

// dY2 [rows, out] W -> dX2 [rows, in], a tile at a time, accumulated in accumulation_dtype.
torch::Tensor product_dx(const QuantizedWeight& w, const torch::Tensor& dy2, const torch::Tensor& absmax) {
  torch::Tensor dx = torch::zeros({dy2.size(0), w.in}, dy2.options().dtype(accumulation_dtype(dy2.scalar_type())));
  const int64_t step = tile_rows(w.in, w.out);
  for (int64_t r0 = 0; r0 < w.out; r0 += step) {
    const int64_t r1 = std::min(w.out, r0 + step);
    const torch::Tensor tile = w.dequantize_rows(r0, r1, dy2.scalar_type(), absmax);
    matmul_into(dx, dy2.narrow(1, r0, r1 - r0).contiguous(), false, tile, false, 1.0f);
  }
  return dx;
}

std::vector<int64_t> with_last(c10::IntArrayRef sizes, int64_t last) {
  auto v = sizes.vec();
  v.back() = last;
  return v;
}

// One autograd operation: the packed codes, the float32 block absmax and the code values are saved for backward
// (the storage itself, no copy); the settings travel as saved data.
class QuantizedLinear : public torch::autograd::Function<QuantizedLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& bias,
                               const std::shared_ptr<const QuantizedWeight>& w) {
    const torch::ScalarType dtype = product_dtype(*w);
    const torch::Tensor x2 = x.reshape({-1, w->in}).to(dtype).contiguous();
    const torch::Tensor absmax = w->block_absmax();
    torch::Tensor y2 = torch::empty({x2.size(0), w->out}, x2.options());
    if (x2.size(0) > 0) product_forward(*w, x2, absmax, y2);
    if (bias.numel() > 0) y2.add_(bias.to(dtype));
    const bool autocast = current_autocast_dtype() != torch::kFloat;
    ctx->save_for_backward({w->packed, absmax, w->quant_map});
    ctx->saved_data["out"] = w->out;
    ctx->saved_data["in"] = w->in;
    ctx->saved_data["blocksize"] = w->settings.blocksize;
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    torch::Tensor y = y2.view(with_last(x.sizes(), w->out));
    return autocast || x.scalar_type() == dtype ? y : y.to(x.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    QuantizedWeight w;
    w.packed = saved[0];
    w.quant_map = saved[2];
    w.out = ctx->saved_data["out"].toInt();
    w.in = ctx->saved_data["in"].toInt();
    w.settings.blocksize = ctx->saved_data["blocksize"].toInt();
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const torch::Tensor dy2 = grads[0].reshape({-1, w.out}).to(dtype).contiguous();
    torch::Tensor dx, db;
    if (ctx->needs_input_grad(0))
      dx = product_dx(w, dy2, saved[1]).to(x_dtype).view(with_last(grads[0].sizes(), w.in));
    if (ctx->needs_input_grad(1) && ctx->saved_data["has_bias"].toBool()) db = dy2.to(accumulation_dtype(dtype)).sum(0);
    return {dx, db, torch::Tensor()};
  }
};

}  // namespace

int64_t quant_tile_elements() { return tile_setting(); }
void set_quant_tile_elements(int64_t elements) { tile_setting() = elements > 0 ? elements : kDefaultTileElements; }

torch::Tensor QuantizedWeight::block_absmax() const {
  if (!nested()) return absmax;
  const int64_t n = absmax.numel();
  const kernels::RowKernels* k = dequantizing_kernels(absmax.device());
  if (k == nullptr) {
    const torch::Tensor index = torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(absmax.device()));
    const torch::Tensor scale = nested_absmax.index_select(0, torch::div(index, settings.nested_blocksize, "floor"));
    return nested_quant_map.index_select(0, absmax.to(torch::kLong)) * scale + offset;
  }
  torch::Tensor out = torch::empty({n}, absmax.options().dtype(torch::kFloat));
  const torch::Tensor codes = absmax.contiguous(), scales = nested_absmax.to(absmax.device()).contiguous(),
                      map = nested_quant_map.to(absmax.device()).contiguous();
  k->dequantize_8bit_blockwise(codes.data_ptr<uint8_t>(), n, settings.nested_blocksize, map.data_ptr<float>(),
                               scales.data_ptr<float>(), offset, out.data_ptr<float>());
  return out;
}

torch::Tensor QuantizedWeight::dequantize_rows(int64_t row0, int64_t row1, torch::ScalarType dtype,
                                               const torch::Tensor& block_scales) const {
  if (eight_bit()) return dequantize_int8_rows(*this, row0, row1, dtype);
  const int64_t begin = row0 * in, end = row1 * in;
  const kernels::RowKernels* k = dequantizing_kernels(packed.device());
  if (k == nullptr) return dequantize_with_ops(*this, begin, end, block_scales).to(dtype).view({row1 - row0, in});
  const torch::Tensor codes = packed.contiguous(), scales = block_scales.to(packed.device()).contiguous(),
                      map = quant_map.to(packed.device()).contiguous();
  const bool bf16 = dtype == torch::kBFloat16;
  torch::Tensor out = torch::empty({row1 - row0, in}, packed.options().dtype(bf16 ? torch::kBFloat16 : torch::kFloat));
  if (bf16)
    k->dequantize_4bit_bf16(codes.data_ptr<uint8_t>(), scales.data_ptr<float>(), map.data_ptr<float>(), settings.blocksize,
                            begin, end, reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()));
  else
    k->dequantize_4bit(codes.data_ptr<uint8_t>(), scales.data_ptr<float>(), map.data_ptr<float>(), settings.blocksize,
                       begin, end, out.data_ptr<float>());
  return out.scalar_type() == dtype ? out : out.to(dtype);
}

torch::Tensor QuantizedWeight::dequantize(torch::ScalarType dtype) const {
  torch::NoGradGuard no_grad;
  return dequantize_rows(0, out, dtype, block_absmax());
}

int64_t QuantizedWeight::storage_bytes() const {
  int64_t bytes = 0;
  for (const torch::Tensor* t : {&packed, &absmax, &nested_absmax})
    if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
  return bytes;
}

QuantizedWeight quantize_weight(const torch::Tensor& weight_out_in, const QuantSettings& settings) {
  if (settings.bits == 8) return quantize_int8_rows(weight_out_in, settings);
  if (weight_out_in.dim() != 2) throw RuntimeFailure("4-bit quantisation: expected a [out, in] weight");
  QuantizedWeight q;
  q.settings = settings;
  q.out = weight_out_in.size(0);
  q.in = weight_out_in.size(1);
  q.source_dtype = weight_out_in.scalar_type();
  const int64_t n = q.numel(), blocks = kernels::quant_blocks(n, settings.blocksize);
  const int64_t nested_blocks = kernels::quant_blocks(blocks, settings.nested_blocksize);
  q.quant_map = code_table(settings.type);
  if (settings.double_quant) q.nested_quant_map = dynamic_map_table();
  if (weight_out_in.is_meta()) {
    const auto meta = torch::TensorOptions().device(torch::kMeta);
    q.packed = torch::empty({(n + 1) / 2, 1}, meta.dtype(torch::kByte));
    q.absmax = torch::empty({blocks}, meta.dtype(settings.double_quant ? torch::kByte : torch::kFloat));
    if (settings.double_quant) q.nested_absmax = torch::empty({nested_blocks}, meta.dtype(torch::kFloat));
    return q;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor x = weight_out_in.detach().to(torch::kCPU, torch::kFloat).contiguous();
  torch::Tensor packed = torch::empty({(n + 1) / 2, 1}, torch::kByte), absmax = torch::empty({blocks}, torch::kFloat);
  kernels::quantize_4bit(x.data_ptr<float>(), n, settings.blocksize, settings.type, packed.data_ptr<uint8_t>(), absmax.data_ptr<float>());
  q.packed = packed;
  q.absmax = absmax;
  if (settings.double_quant) {
    q.offset = static_cast<float>(absmax.to(torch::kDouble).mean().item<double>());
    const torch::Tensor centred = absmax - q.offset;
    torch::Tensor codes = torch::empty({blocks}, torch::kByte), nested = torch::empty({nested_blocks}, torch::kFloat);
    kernels::quantize_8bit_blockwise(centred.data_ptr<float>(), blocks, settings.nested_blocksize, kernels::dynamic_map_signed(),
                                     codes.data_ptr<uint8_t>(), nested.data_ptr<float>());
    q.absmax = codes;
    q.nested_absmax = nested;
  }
  const torch::Device device = weight_out_in.device();
  if (!device.is_cpu())
    for (torch::Tensor* t : {&q.packed, &q.absmax, &q.quant_map, &q.nested_absmax, &q.nested_quant_map})
      if (t->defined()) *t = t->to(device);
  return q;
}

torch::Tensor quantized_linear(const torch::Tensor& x, const std::shared_ptr<const QuantizedWeight>& weight,
                               const torch::Tensor& bias) {
  if (weight->eight_bit()) return int8_linear(x, weight, bias);
  return QuantizedLinear::apply(x, bias.defined() ? bias : torch::empty({0}, x.options()), weight);
}

torch::Tensor quantized_adapted_row_norms(const QuantizedWeight& w, const torch::Tensor& lora_B, const torch::Tensor& lora_A,
                                          double scaling) {
  torch::NoGradGuard no_grad;
  const torch::Tensor absmax = w.block_absmax(), a = lora_A.to(torch::kFloat);
  torch::Tensor norms = torch::empty({w.out}, torch::TensorOptions().dtype(torch::kFloat).device(w.packed.device()));
  const int64_t step = tile_rows(w.in, w.out);
  for (int64_t r0 = 0; r0 < w.out; r0 += step) {
    const int64_t r1 = std::min(w.out, r0 + step);
    const torch::Tensor delta = torch::matmul(lora_B.narrow(0, r0, r1 - r0).to(torch::kFloat), a);
    norms.narrow(0, r0, r1 - r0).copy_((w.dequantize_rows(r0, r1, torch::kFloat, absmax) + scaling * delta).norm(2, 1));
  }
  return norms;
}

}  // namespace hftrain
