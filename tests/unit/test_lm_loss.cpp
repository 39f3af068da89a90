// The fused, chunked language-model loss (models/lm_loss.h) against LibTorch's op-by-op result: the
// output layer (linear) followed by F::cross_entropy / HF's LabelSmoother, for odd chunk sizes, ignored
// labels, a bias, label smoothing, a given denominator, frozen weights and bf16 autocast; then every
// language-model family's loss and parameter gradients with chunking on against the same model with it off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "models/lm_loss.h"
#include "models/model.h"
#include "seq2seq_model_helpers.h"
#include "util/autocast.h"

using namespace hftrain;

namespace {

double max_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const auto fa = a.to(torch::kDouble), fb = b.to(torch::kDouble);
  return ((fa - fb).abs().max() / fb.abs().max().clamp_min(1e-30)).item<double>();
}

struct Case {
  torch::Tensor features, weight, bias, labels;
};

// Features [3, 5, 16], vocabulary 41, labels with ignored positions.
Case make_case(bool with_bias) {
  torch::manual_seed(7);
  Case c;
  c.features = torch::randn({3, 5, 16}).requires_grad_(true);
  c.weight = (torch::randn({41, 16}) * 0.3).requires_grad_(true);
  if (with_bias) c.bias = (torch::randn({41}) * 0.1).requires_grad_(true);
  c.labels = torch::randint(0, 41, {3, 5}, torch::kLong);
  c.labels.index_put_({0, 1}, -100);
  c.labels.index_put_({2, torch::indexing::Slice(2, 5)}, -100);
  return c;
}

// Loss and gradients (features, weight, bias) of `loss_of`.
std::vector<torch::Tensor> loss_and_grads(const Case& c, const std::function<torch::Tensor()>& loss_of) {
  for (auto t : {c.features, c.weight, c.bias})
    if (t.defined() && t.grad().defined()) t.mutable_grad().reset();
  torch::Tensor loss = loss_of();
  loss.backward();
  auto grad_of = [](const torch::Tensor& t) { return t.defined() && t.grad().defined() ? t.grad().clone() : torch::Tensor(); };
  return {loss.detach(), grad_of(c.features), grad_of(c.weight), grad_of(c.bias)};
}

torch::Tensor reference_loss(const Case& c, double epsilon, double denominator) {
  const torch::Tensor logits = torch::nn::functional::linear(c.features, c.weight, c.bias);
  if (epsilon != 0) return label_smoothed_loss(logits, c.labels, epsilon, /*shift_labels=*/false, denominator);
  return token_cross_entropy(logits.reshape({-1, logits.size(-1)}), c.labels.reshape({-1}), denominator);
}

}  // namespace

TEST_CASE("chunked linear cross-entropy equals linear + cross-entropy for any chunk size", "[unit][lm_loss]") {
  for (const bool with_bias : {false, true})
    for (const double epsilon : {0.0, 0.1})
      for (const double denominator : {0.0, 17.0}) {
        const Case c = make_case(with_bias);
        const auto expected = loss_and_grads(c, [&] { return reference_loss(c, epsilon, denominator); });
        for (const int64_t chunk : {1, 3, 7, 11, 1000, 0}) {
          INFO("bias " << with_bias << " epsilon " << epsilon << " denominator " << denominator << " chunk " << chunk);
          const auto got = loss_and_grads(c, [&] {
            return linear_cross_entropy(c.features, c.weight, c.bias, c.labels, epsilon, denominator, chunk);
          });
          CHECK(max_relative_difference(got[0], expected[0]) < 1e-6);
          CHECK(max_relative_difference(got[1], expected[1]) < 1e-5);
          CHECK(max_relative_difference(got[2], expected[2]) < 1e-5);
          if (with_bias) CHECK(max_relative_difference(got[3], expected[3]) < 1e-5);
          // Ignored positions pass nothing back.
          CHECK(got[1][0][1].abs().sum().item<double>() == 0.0);
        }
      }
}

// The host's facts of the labels (Batch::scored_tokens, LossNormaliser::prepare) pick the scored rows without their
// count being read back: the same rows in the same order as without them, so the same bits.
TEST_CASE("chunked linear cross-entropy with the host's label facts is bitwise the same, and names a bad label",
          "[unit][lm_loss]") {
  const Case c = make_case(true);
  Batch batch;
  batch.labels = c.labels;
  auto model = hftrain_test::build_model("llama", "{vocab_size: 41, hidden_size: 16, intermediate_size: 24, "
                                         "num_hidden_layers: 1, num_attention_heads: 2, max_position_embeddings: 8}");
  ScoredLabels known;  // of the labels as given to the loss (the model's facts are of labels[:, 1:])
  const int64_t count = note_scored_labels(*model, batch);  // a causal LM scores labels[:, 1:]
  CHECK(count == c.labels.slice(1, 1, 5).ne(-100).sum().item<int64_t>());
  CHECK(batch.scored_tokens == count);
  known.count = c.labels.ne(-100).sum().item<int64_t>();
  known.smallest = c.labels.masked_select(c.labels.ne(-100)).min().item<int64_t>();
  known.largest = c.labels.masked_select(c.labels.ne(-100)).max().item<int64_t>();
  for (const int64_t chunk : {1, 4, 1000}) {
    INFO("chunk " << chunk);
    const auto plain = loss_and_grads(c, [&] { return linear_cross_entropy(c.features, c.weight, c.bias, c.labels, 0.1, 0, chunk); });
    const auto got = loss_and_grads(c, [&] {
      return linear_cross_entropy(c.features, c.weight, c.bias, c.labels, 0.1, 0, chunk, 0.0, known);
    });
    for (std::size_t i = 0; i < plain.size(); ++i) CHECK(torch::equal(got[i], plain[i]));
  }
  // A label outside the vocabulary is still named, whatever the host claimed (the host kernel checks regardless).
  Case bad = make_case(false);
  bad.labels.index_put_({1, 2}, 41);
  CHECK_THROWS_WITH(linear_cross_entropy(bad.features, bad.weight, bad.bias, bad.labels, 0, 0, 4, 0.0, known),
                    Catch::Contains("41"));
}

TEST_CASE("chunked linear cross-entropy: frozen weights get no gradient, and the loss's own gradient scales",
          "[unit][lm_loss]") {
  Case c = make_case(false);
  c.weight = c.weight.detach();  // a frozen output layer (LoRA base)
  const auto expected = loss_and_grads(c, [&] { return 3.0 * reference_loss(c, 0, 0); });
  const auto got = loss_and_grads(c, [&] { return 3.0 * linear_cross_entropy(c.features, c.weight, c.bias, c.labels, 0, 0, 4); });
  CHECK(!got[2].defined());
  CHECK(max_relative_difference(got[0], expected[0]) < 1e-6);
  CHECK(max_relative_difference(got[1], expected[1]) < 1e-5);
}

TEST_CASE("chunked linear cross-entropy under bf16 autocast follows autocast's linear", "[unit][lm_loss]") {
  const Case c = make_case(true);
  std::vector<torch::Tensor> expected, got;
  {
    AutocastScope autocast(torch::kBFloat16);
    expected = loss_and_grads(c, [&] { return reference_loss(c, 0.0, 0.0); });
    got = loss_and_grads(c, [&] { return linear_cross_entropy(c.features, c.weight, c.bias, c.labels, 0.0, 0.0, 4); });
  }
  CHECK(got[0].scalar_type() == torch::kFloat);
  CHECK(got[2].scalar_type() == torch::kFloat);  // the fp32 weight gets an fp32 gradient, as through autocast
  CHECK(max_relative_difference(got[0], expected[0]) < 1e-2);
  for (int i = 1; i <= 3; ++i) CHECK(max_relative_difference(got[i], expected[i]) < 3e-2);
}

TEST_CASE("auto chunk size follows Liger's rule with a floor of 2^23 logits", "[unit][lm_loss]") {
  CHECK(auto_chunk_tokens(65536, 32000, 4096) == 8192);  // Liger: ceil(32000 / 4096) = 8; 65536 / 8
  CHECK(auto_chunk_tokens(4096, 32000, 4096) == 512);    // Liger: 4096 / 8 = 512 (floor 256)
  CHECK(auto_chunk_tokens(2040, 32000, 256) == 256);     // Liger's 32, floor: 256 x 32000 <= 2^23
  CHECK(auto_chunk_tokens(1000, 128256, 768) == 64);     // Liger's 16, floor 64
  CHECK(auto_chunk_tokens(100, 65, 128) == 65536);       // a tiny vocabulary: one chunk whatever the tokens
}

TEST_CASE("every language-model family's loss and gradients are the same with the chunked loss", "[unit][lm_loss]") {
  const std::map<std::string, std::string> families = {
      {"gpt", "{vocab_size: 29, block_size: 16, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0}"},
      {"gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, resid_pdrop: 0, embd_pdrop: 0, "
               "attn_pdrop: 0, tie_word_embeddings: false}"},
      {"llama", "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 16}"},
      {"gemma2", "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                 "num_key_value_heads: 2, head_dim: 8, max_position_embeddings: 16, initializer_range: 0.3, "
                 "final_logit_softcapping: 2.0, sliding_window: 3}"},  // the cap binds: tanh's derivative in the loss
      {"bert_mlm", "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48, "
                   "max_position_embeddings: 16, hidden_dropout_prob: 0, attention_probs_dropout_prob: 0}"},
      {"t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 2, num_heads: 4, "
             "relative_attention_num_buckets: 8, relative_attention_max_distance: 6, dropout_rate: 0}"},
      {"bart", "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 16, "
               "dropout: 0}"}};
  for (const auto& [family, options] : families) {
    INFO(family);
    Batch batch;
    if (family == "t5" || family == "bart") {
      batch = family == "t5" ? hftrain_test::seq2seq_batch(/*pad=*/0, /*eos=*/1) : hftrain_test::seq2seq_batch(1, 2);
    } else {
      batch.input_ids = torch::tensor(std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 0}).view({2, 7});
      batch.attention_mask = torch::tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0}}, torch::kLong);
      batch.labels = batch.input_ids.clone();
      batch.labels.index_put_({1, torch::indexing::Slice(5, 7)}, -100);
      if (family == "bert_mlm") batch.labels.index_put_({0, torch::indexing::Slice(0, 3)}, -100);
    }
    for (const double denominator : {0.0, 9.0})
      for (const double smoothing : {0.0, 0.1}) {
        batch.loss_denominator = denominator;
        batch.label_smoothing = smoothing;
        auto run = [&](bool chunked) {
          auto model = hftrain_test::build_model(family, options, 3);
          model->set_lm_loss({chunked, 5});
          model->train();
          ModelOutput out = model->forward(batch);
          if (!chunked && smoothing != 0)
            out.loss = label_smoothed_loss(out.logits, batch.labels, smoothing, model->is_causal_lm(), denominator);
          CHECK(out.logits.defined() != chunked);  // chunked: no logits at all
          out.loss.backward();
          std::map<std::string, torch::Tensor> grads = {{"loss", out.loss.detach()}};
          for (auto& np : model->named_parameters())
            if (np.value().grad().defined()) grads[np.key()] = np.value().grad().clone();
          return grads;
        };
        const auto plain = run(false), chunked = run(true);
        CHECK(plain.size() == chunked.size());
        // Relative to each gradient's own size, with a floor of 1e-4 of the model's largest gradient: an
        // attention key bias has a gradient that is zero in exact arithmetic (softmax is shift-invariant), so
        // both paths give rounding noise there, of no relative meaning.
        double largest = 0;
        for (const auto& [name, g] : plain)
          if (name != "loss") largest = std::max(largest, g.abs().max().item<double>());
        for (const auto& [name, expected] : plain) {
          INFO(name << " denominator " << denominator << " smoothing " << smoothing);
          REQUIRE(chunked.count(name));
          const double scale = std::max(expected.abs().max().item<double>(), name == "loss" ? 0.0 : 1e-4 * largest);
          CHECK((chunked.at(name) - expected).abs().max().item<double>() <= 1e-5 * scale);
        }
      }
  }
}
