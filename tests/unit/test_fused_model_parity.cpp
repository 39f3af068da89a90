// The seq2seq families through the fused CPU kernels against LibTorch's ops (#35's whole-model parity): t5
// (RMSNorm, the chunked cross-entropy) and bart (LayerNorm, GELU, the cross-entropy) give the same loss and
// gradients either way, within 1e-5 of each gradient's largest value; the kernels' call counters prove that
// the fused run took them and the LibTorch run did not. (gpt, gpt2, llama and bert: test_fused_attention.cpp.)
#include <catch2/catch.hpp>

#include <map>

#include "kernel_parity.h"
#include "seq2seq_model_helpers.h"

using namespace hftrain;
using kernels::FusedKernel;

namespace {

std::map<FusedKernel, int64_t> counts(const std::vector<FusedKernel>& which) {
  std::map<FusedKernel, int64_t> c;
  for (FusedKernel k : which) c[k] = kernels::fused_calls(k);
  return c;
}

void check_parity(Model& model, const Batch& batch, const std::vector<FusedKernel>& expected_kernels) {
  model.train();
  model.set_lm_loss({/*chunked=*/true, /*chunk_tokens=*/4});  // as training computes it: the chunked cross-entropy
  const auto before = counts(expected_kernels);
  const auto fused = hftrain_test::loss_and_gradients(model, batch, true);
  const auto after_fused = counts(expected_kernels);
  const auto ops = hftrain_test::loss_and_gradients(model, batch, false);
  const auto after_ops = counts(expected_kernels);
  for (FusedKernel k : expected_kernels) {
    INFO("kernel " << static_cast<int>(k));
    CHECK(after_fused.at(k) > before.at(k));     // the fused run used it
    CHECK(after_ops.at(k) == after_fused.at(k));  // the LibTorch run did not
  }
  CHECK(fused.size() > 10);
  hftrain_test::check_within_1e5(fused, ops);
}

}  // namespace

TEST_CASE("t5 and bart give the same loss and gradients with the fused kernels as with the LibTorch ops", "[unit][kernels]") {
  SECTION("t5") {
    auto model = hftrain_test::build_model(
        "t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 2, num_heads: 4, "
              "relative_attention_num_buckets: 8, relative_attention_max_distance: 6, pad_token_id: 0, eos_token_id: 1, "
              "decoder_start_token_id: 0, dropout_rate: 0}",
        /*seed=*/3);
    check_parity(*model, hftrain_test::seq2seq_batch(/*pad=*/0, /*eos=*/1), {FusedKernel::kRmsNorm, FusedKernel::kCrossEntropy});
  }
  SECTION("bart") {
    auto model = hftrain_test::build_model(
        "bart", "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
                "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 16, "
                "dropout: 0, attention_dropout: 0, activation_dropout: 0}",
        /*seed=*/3);
    check_parity(*model, hftrain_test::seq2seq_batch(/*pad=*/1, /*eos=*/2),
                 {FusedKernel::kLayerNorm, FusedKernel::kGelu, FusedKernel::kCrossEntropy});
  }
}
