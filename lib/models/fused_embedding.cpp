// The embedding as one autograd operation over the fused gather / scatter (see fused_embedding.h).
#include "models/fused_embedding.h"

#include <string>

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/embedding.h"
#include "kernels/kernel_choice.h"
#include "util/error.h"

namespace hftrain {
namespace {

kernels::TableType table_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat ? kernels::TableType::kFloat : kernels::TableType::kBFloat16;
}

class FusedEmbedding : public torch::autograd::Function<FusedEmbedding> {
 public:
  // ids: contiguous int64, checked against the table. skip_id: padding_idx, or -1.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& table, const torch::Tensor& ids,
                               int64_t skip_id) {
    const int64_t cols = table.size(1);
    std::vector<int64_t> shape = ids.sizes().vec();
    shape.push_back(cols);
    torch::Tensor out = torch::empty(shape, table.options().requires_grad(false));
    kernels::embedding_gather(table.data_ptr(), table_type(table), ids.data_ptr<int64_t>(), ids.numel(), cols,
                              out.data_ptr());
    ctx->save_for_backward({ids});
    ctx->saved_data["rows"] = table.size(0);
    ctx->saved_data["skip_id"] = skip_id;
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const torch::Tensor ids = ctx->get_saved_variables()[0];
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const torch::Tensor g = grads[0].contiguous();
    const int64_t cols = g.size(-1);
    torch::Tensor grad_table = torch::empty({rows, cols}, g.options());
    kernels::embedding_scatter(g.data_ptr(), table_type(g), ids.data_ptr<int64_t>(), ids.numel(), cols, rows,
                               ctx->saved_data["skip_id"].toInt(), grad_table.data_ptr());
    return {grad_table, torch::Tensor(), torch::Tensor()};
  }
};

bool host_table(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.dim() == 2 && t.is_contiguous() &&
         (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
}

}  // namespace

torch::Tensor apply_embedding(torch::nn::Embedding embedding, const torch::Tensor& ids) {
  const auto& options = embedding->options;
  const torch::Tensor& table = embedding->weight;
  const bool fused = kernels::fused_kernels_enabled() && host_table(table) && ids.device().is_cpu() &&
                     (ids.scalar_type() == torch::kLong || ids.scalar_type() == torch::kInt) && !options.max_norm() &&
                     !options.scale_grad_by_freq() && !options.sparse();
  if (!fused) return embedding(ids);
  const torch::Tensor ids64 = ids.to(torch::kLong).contiguous();
  const int64_t outside = kernels::first_id_outside(ids64.data_ptr<int64_t>(), ids64.numel(), table.size(0));
  if (outside >= 0)
    throw RuntimeFailure("token id " + std::to_string(ids64.view(-1)[outside].item<int64_t>()) + " (position " +
                         std::to_string(outside) + " of the batch) is outside the embedding table of " +
                         std::to_string(table.size(0)) + " rows");
  kernels::count_fused_call(kernels::FusedKernel::kEmbedding);
  return FusedEmbedding::apply(table, ids64, options.padding_idx() ? *options.padding_idx() : int64_t{-1});
}

}  // namespace hftrain
