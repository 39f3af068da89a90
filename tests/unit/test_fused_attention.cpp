// The fused CPU attention (kernels/attention, models/fused_attention) against attention written op by op in
// float64 (q k^T, mask, softmax, times v) -- values and the gradients of q, k and v -- on every instruction set
// this machine has, for odd shapes, causal and not, fewer queries than keys (generation), per-key biases with
// masked keys, strided inputs and bf16; and whole families (gpt, gpt2, llama, bert) giving the same loss and
// gradients with the fused kernels as with the LibTorch ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernel_parity.h"
#include "kernels/attention.h"
#include "kernels/kernel_choice.h"
#include "models/bert.h"
#include "models/fused_attention.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/llama.h"

using namespace hftrain;

namespace {

// The reference: float64 ops, the bias added per key, the causal mask aligned at the end.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& bias, bool causal) {
  const auto Tq = q.size(2), Tk = k.size(2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (bias.defined()) scores = scores + bias.to(torch::kDouble);
  if (causal) {
    auto allowed = torch::ones({Tq, Tk}, torch::kBool).tril(Tk - Tq);
    scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v);
}

struct AttentionCase {
  int64_t B, H, Tq, Tk, d;
  bool causal;
  int bias;  // 0 none, 1 per batch row [B, 1, 1, Tk] with masked keys, 2 shared [1, 1, 1, Tk]
};

double attention_max_rel(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want).abs().max().item<double>() / std::max(1e-3, want.abs().max().item<double>());
}

}  // namespace

TEST_CASE("fused attention equals softmax(q k^T / sqrt(d) + bias) v and its gradients, on every instruction set",
          "[unit][kernels]") {
  const std::vector<AttentionCase> cases = {{2, 3, 7, 7, 5, true, 0},   {1, 2, 17, 17, 33, true, 1}, {2, 2, 5, 9, 16, true, 1},
                                   {3, 1, 1, 13, 8, true, 2},  {2, 2, 6, 6, 32, false, 1},  {1, 1, 40, 40, 64, true, 0},
                                   {2, 4, 3, 11, 20, false, 2}};
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const AttentionCase& c : cases) {
      INFO(isa << ": B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk << " d " << c.d << " causal "
                << c.causal << " bias " << c.bias);
      torch::manual_seed(c.Tq * 7 + c.d);
      // q as a strided view of a [B, T, H, d] buffer (the layout the model's projections give).
      auto q64 = torch::randn({c.B, c.Tq, c.H, c.d}, torch::kDouble).transpose(1, 2);
      auto k64 = torch::randn({c.B, c.H, c.Tk, c.d}, torch::kDouble);
      auto v64 = torch::randn({c.B, c.H, c.Tk, c.d}, torch::kDouble);
      torch::Tensor bias;
      if (c.bias == 1) {
        bias = torch::zeros({c.B, 1, 1, c.Tk});
        bias.index_put_({0, 0, 0, 0}, std::numeric_limits<float>::lowest());  // HF's padding bias (finfo.min)
        bias.index_put_({c.B - 1, 0, 0, c.Tk - 1}, -std::numeric_limits<float>::infinity());
      } else if (c.bias == 2) {
        bias = torch::randn({1, 1, 1, c.Tk});
      }
      auto q = q64.to(torch::kFloat).requires_grad_(true), k = k64.to(torch::kFloat).requires_grad_(true),
           v = v64.to(torch::kFloat).requires_grad_(true);
      REQUIRE(fused_attention_applies(q, k, v, bias, 0.0));
      auto out = fused_attention(q, k, v, bias, 1.0 / std::sqrt(static_cast<double>(c.d)), c.causal);
      auto qr = q64.clone().requires_grad_(true), kr = k64.clone().requires_grad_(true), vr = v64.clone().requires_grad_(true);
      auto want = reference_attention(qr, kr, vr, bias, c.causal);
      CHECK(out.sizes() == want.sizes());
      CHECK(attention_max_rel(out, want) < 2e-6);
      const auto grad_out = torch::randn(want.sizes(), torch::kDouble);
      out.backward(grad_out.to(torch::kFloat));
      want.backward(grad_out);
      CHECK(attention_max_rel(q.grad(), qr.grad()) < 1e-5);
      CHECK(attention_max_rel(k.grad(), kr.grad()) < 1e-5);
      CHECK(attention_max_rel(v.grad(), vr.grad()) < 1e-5);

      // bf16 inputs: computed in fp32 from the rounded values, returned in bf16.
      auto qb = q64.to(torch::kBFloat16), kb = k64.to(torch::kBFloat16), vb = v64.to(torch::kBFloat16);
      auto outb = fused_attention(qb, kb, vb, bias, 1.0 / std::sqrt(static_cast<double>(c.d)), c.causal);
      CHECK(outb.scalar_type() == torch::kBFloat16);
      auto wantb = reference_attention(qb.to(torch::kDouble), kb.to(torch::kDouble), vb.to(torch::kDouble), bias, c.causal);
      CHECK(attention_max_rel(outb, wantb) < 1e-2);
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("fused attention is not used where its math differs from the LibTorch ops'", "[unit][kernels]") {
  auto q = torch::randn({2, 2, 4, 8}), k = torch::randn({2, 2, 4, 8}), v = torch::randn({2, 2, 4, 8});
  CHECK(fused_attention_applies(q, k, v, {}, 0.0));
  CHECK_FALSE(fused_attention_applies(q, k, v, {}, 0.1));                          // attention dropout
  CHECK_FALSE(fused_attention_applies(q, k, v, torch::zeros({2, 1, 4, 4}), 0.0));  // a bias per query
  CHECK_FALSE(fused_attention_applies(q, k, v, torch::zeros({2, 1, 1, 4}).requires_grad_(true), 0.0));  // trained bias
  CHECK_FALSE(fused_attention_applies(q.to(torch::kDouble), k, v, {}, 0.0));
  CHECK(fused_attention_applies(q, k, v, torch::zeros({2, 1, 1, 4}), 0.0));
  kernels::set_fused_kernels_enabled(false);
  CHECK_FALSE(fused_attention_applies(q, k, v, {}, 0.0));
  kernels::set_fused_kernels_enabled(true);
}

namespace {

void check_same(Model& model, const Batch& batch) {
  model.train();
  const int64_t calls = kernels::fused_calls(kernels::FusedKernel::kAttention);
  const auto fused = hftrain_test::loss_and_gradients(model, batch, true);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kAttention) == calls + 2);  // both layers' attention, fused
  const auto ops = hftrain_test::loss_and_gradients(model, batch, false);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kAttention) == calls + 2);
  hftrain_test::check_within_1e5(fused, ops);
}

}  // namespace

TEST_CASE("gpt, gpt2, llama and bert give the same loss and gradients with the fused attention as with the LibTorch ops",
          "[unit][kernels]") {
  ModelContext context;
  context.vocab_size = 29;
  context.max_length = 32;
  context.num_labels = 3;
  Batch lm;
  torch::manual_seed(4);
  lm.input_ids = torch::randint(0, 29, {3, 13}, torch::kLong);
  lm.labels = lm.input_ids.clone();
  lm.attention_mask = torch::ones({3, 13}, torch::kLong);
  lm.attention_mask.index_put_({1, torch::indexing::Slice(10, 13)}, 0);  // right padding in one row
  lm.labels.index_put_({1, torch::indexing::Slice(10, 13)}, -100);
  SECTION("gpt") {
    Gpt::Options o;
    o.n_layer = 2;
    o.n_head = 2;
    o.n_embd = 24;
    o.dropout = 0.0;
    Batch b = lm;
    b.attention_mask = torch::Tensor();
    Gpt model(o, context);
    check_same(model, b);
  }
  SECTION("gpt2") {
    Gpt2::Options o;
    o.n_layer = 2;
    o.n_head = 3;
    o.n_embd = 24;
    o.attn_pdrop = o.resid_pdrop = o.embd_pdrop = 0.0;
    Gpt2 model(o, context);
    check_same(model, lm);
  }
  SECTION("llama") {
    Llama::Options o;
    o.hidden_size = 32;
    o.intermediate_size = 48;
    o.num_hidden_layers = 2;
    o.num_attention_heads = 4;
    o.num_key_value_heads = 2;
    Llama model(o, context);
    check_same(model, lm);
  }
  SECTION("bert") {
    BertForSequenceClassification::Options o;
    o.hidden_size = 24;
    o.num_hidden_layers = 2;
    o.num_attention_heads = 2;
    o.intermediate_size = 40;
    o.hidden_dropout_prob = o.attention_probs_dropout_prob = 0.0;
    Batch b = lm;
    b.labels = torch::tensor({0, 2, 1}, torch::kLong);
    BertForSequenceClassification model(o, context);
    check_same(model, b);
  }
}
