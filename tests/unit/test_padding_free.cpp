// Padding-free batches (training.padding_free; data/packing.h): the flattened row's layout (HF
// DataCollatorWithFlattening: positions restarting per example, the first label of each example -100; for
// encoder-decoder pairs, sources and targets packed side by side with each target's decoder input
// restarting at the decoder start token), and for every family that packs (gpt, gpt2, llama, t5, bart) the
// loss and every parameter gradient of the packed micro-batch against the padded one (whose numerics
// tests/reference/hf_models_reference.py, t5_reference.py and bart_reference.py check against independent
// forwards), with the chunked loss on and off and with gradient checkpointing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "data/loader.h"
#include "data/packing.h"
#include "models/model.h"
#include "models/packed_seq2seq.h"
#include "seq2seq_model_helpers.h"

using namespace hftrain;

namespace {

// Examples of lengths 5, 9, 2 and 7; the second scores only its last four tokens (a prompt of five).
std::vector<Example> examples() {
  std::vector<Example> out;
  int64_t next = 3;
  for (const int64_t n : {5, 9, 2, 7}) {
    Example e;
    for (int64_t t = 0; t < n; ++t) e.input_ids.push_back(next++ % 25 + 2);
    e.labels = e.input_ids;
    out.push_back(e);
  }
  for (int t = 0; t < 5; ++t) out[1].labels[static_cast<std::size_t>(t)] = -100;
  return out;
}

// Sequence-to-sequence pairs: sources of 5, 9, 2 and 7 tokens, targets of 4, 1, 6 and 3 (ids from 3 up: 0, 1
// and 2 are pad, eos and the decoder start of the families below).
std::vector<Example> pairs() {
  std::vector<Example> out;
  int64_t next = 5;
  const std::vector<std::pair<int64_t, int64_t>> lengths = {{5, 4}, {9, 1}, {2, 6}, {7, 3}};
  for (const auto& [source, target] : lengths) {
    Example e;
    for (int64_t t = 0; t < source; ++t) e.input_ids.push_back(next++ % 25 + 3);
    for (int64_t t = 0; t < target; ++t) e.labels.push_back(next++ % 25 + 3);
    out.push_back(e);
  }
  return out;
}

// Loss and every parameter gradient of one forward / backward of `family` on `batch`.
std::map<std::string, torch::Tensor> loss_and_gradients(const std::string& family, const std::string& options, Batch batch,
                                                        bool chunked, bool checkpointing) {
  auto model = hftrain_test::build_model(family, options, 5);
  model->set_lm_loss({chunked, 3});
  if (checkpointing) model->enable_gradient_checkpointing();
  model->train();
  batch.loss_denominator = static_cast<double>(scored_label_tokens(*model, batch));
  ModelOutput out = model->forward(batch);
  out.loss.backward();
  std::map<std::string, torch::Tensor> grads = {{"loss", out.loss.detach()}};
  for (auto& np : model->named_parameters()) grads[np.key()] = np.value().grad().clone();
  return grads;
}

double packed_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const auto fa = a.to(torch::kDouble), fb = b.to(torch::kDouble);
  return ((fa - fb).abs().max() / fb.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

TEST_CASE("a padding-free batch is one row with positions restarting and each example's first label ignored",
          "[unit][padding_free]") {
  const Batch b = flatten_examples(examples());
  CHECK(b.input_ids.sizes() == torch::IntArrayRef({1, 23}));
  CHECK(b.packed_lengths == std::vector<int64_t>{5, 9, 2, 7});
  CHECK(b.position_ids[0].slice(0, 3, 8).equal(torch::tensor({3, 4, 0, 1, 2}, torch::kLong)));
  CHECK(b.attention_mask.sum().item<int64_t>() == 23);
  for (const int64_t first : {0, 5, 14, 16}) CHECK(b.labels[0][first].item<int64_t>() == -100);
  CHECK(b.labels[0][1].item<int64_t>() == b.input_ids[0][1].item<int64_t>());
  // The same label tokens are scored as in the padded batch (the causal shift drops each row's first).
  const Batch padded = collate(examples(), TaskKind::kCausalLm);
  CHECK(padded.labels.slice(1, 1).ne(-100).sum().item<int64_t>() == b.labels.slice(1, 1).ne(-100).sum().item<int64_t>());
}

TEST_CASE("packed and padded micro-batches give the same loss and gradients in every packing family",
          "[unit][padding_free]") {
  const std::map<std::string, std::string> families = {
      {"gpt", "{vocab_size: 29, block_size: 16, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0}"},
      {"gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, resid_pdrop: 0, embd_pdrop: 0, "
               "attn_pdrop: 0}"},
      {"llama", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 16}"}};
  for (const auto& [family, options] : families)
    for (const bool chunked : {false, true})
      for (const bool checkpointing : {false, true}) {
        INFO(family << " chunked loss " << chunked << " gradient checkpointing " << checkpointing);
        auto run = [&](Batch batch) { return loss_and_gradients(family, options, std::move(batch), chunked, checkpointing); };
        CollateOptions pad;
        pad.pad_id = 1;
        const auto padded = run(collate(examples(), TaskKind::kCausalLm, pad));
        const auto packed = run(flatten_examples(examples()));
        REQUIRE(padded.size() == packed.size());
        for (const auto& [name, expected] : padded) {
          INFO(name);
          CHECK(packed_relative_difference(packed.at(name), expected) < 1e-5);
        }
      }
}

TEST_CASE("a padding-free encoder-decoder row packs sources and targets, each target restarting its decoder input",
          "[unit][padding_free]") {
  const Batch b = flatten_seq2seq_examples(pairs());
  CHECK(b.input_ids.sizes() == torch::IntArrayRef({1, 23}));
  CHECK(b.labels.sizes() == torch::IntArrayRef({1, 14}));
  CHECK(b.packed_lengths == std::vector<int64_t>{5, 9, 2, 7});
  CHECK(b.packed_label_lengths == std::vector<int64_t>{4, 1, 6, 3});
  CHECK(b.labels.ne(-100).all().item<bool>());  // every target token is scored, as in the padded batch
  CHECK(b.position_ids[0].slice(0, 12, 17).equal(torch::tensor({7, 8, 0, 1, 0}, torch::kLong)));
  const Batch padded = collate(pairs(), TaskKind::kSeq2Seq);
  CHECK(padded.labels.ne(-100).sum().item<int64_t>() == 14);
  // Decoder inputs: each target shifted on its own, so every example starts at the decoder start token (2).
  const torch::Tensor shifted = shift_segments_right(b.labels, b.packed_label_lengths, /*pad=*/0, /*start=*/2);
  for (const int64_t first : {0, 4, 5, 11}) CHECK(shifted[0][first].item<int64_t>() == 2);
  CHECK(shifted[0][1].item<int64_t>() == b.labels[0][0].item<int64_t>());
  CHECK(shifted[0][6].item<int64_t>() == b.labels[0][5].item<int64_t>());
  // Attention stays inside each example: per segment, each with its own bias (causal here).
  AttentionBias causal;
  causal.query_segments = causal.key_segments = b.packed_label_lengths;
  causal.per_segment = [](int64_t q, int64_t k) {
    return torch::zeros({q, k}).masked_fill(torch::ones({q, k}, torch::kBool).tril().logical_not(), -1e30);
  };
  const torch::Tensor v = torch::arange(14, torch::kFloat).view({1, 1, 14, 1});
  const torch::Tensor mean_of_visible = attend_by_segments(
      torch::zeros({1, 1, 14, 1}), torch::zeros({1, 1, 14, 1}), v, causal,
      [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& vv, const torch::Tensor& bias) {
        return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) + bias, -1), vv);
      });
  // Equal scores: each query averages the values it may see. Position 7 is the third example's third
  // token (its example spans 5-10), so it sees 5, 6 and 7.
  CHECK(mean_of_visible[0][0][7][0].item<float>() == Approx(6.0));
  CHECK(mean_of_visible[0][0][5][0].item<float>() == Approx(5.0));
  CHECK(mean_of_visible[0][0][4][0].item<float>() == Approx(4.0));  // the second example: itself alone
  // A target without a source cannot be packed (its decoder would attend to nothing).
  std::vector<Example> bad = pairs();
  bad[2].input_ids.clear();
  CHECK_THROWS_WITH(flatten_seq2seq_examples(bad), Catch::Contains("empty source"));
}

TEST_CASE("packed and padded encoder-decoder micro-batches give the same loss and gradients (t5, bart)",
          "[unit][padding_free]") {
  const std::map<std::string, std::string> families = {
      {"t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 2, num_heads: 4, "
             "relative_attention_num_buckets: 8, relative_attention_max_distance: 6, dropout_rate: 0, "
             "decoder_start_token_id: 2}"},
      {"bart", "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 16, "
               "dropout: 0, pad_token_id: 0, eos_token_id: 1, decoder_start_token_id: 2}"}};
  for (const auto& [family, options] : families)
    for (const bool chunked : {false, true})
      for (const bool checkpointing : {false, true}) {
        INFO(family << " chunked loss " << chunked << " gradient checkpointing " << checkpointing);
        CollateOptions pad;
        pad.pad_id = 0;
        const auto padded = loss_and_gradients(family, options, collate(pairs(), TaskKind::kSeq2Seq, pad), chunked, checkpointing);
        const auto packed = loss_and_gradients(family, options, flatten_seq2seq_examples(pairs()), chunked, checkpointing);
        REQUIRE(padded.size() == packed.size());
        // Relative to each gradient's own size, with a floor of 1e-4 of the largest gradient: BART's attention
        // key biases have gradients that are zero in exact arithmetic (softmax is shift-invariant), so both
        // batches give rounding noise there, of no relative meaning.
        double largest = 0;
        for (const auto& [name, g] : padded)
          if (name != "loss") largest = std::max(largest, g.abs().max().item<double>());
        for (const auto& [name, expected] : padded) {
          INFO(name);
          const double scale = std::max(expected.abs().max().item<double>(), name == "loss" ? 0.0 : 1e-4 * largest);
          CHECK((packed.at(name) - expected).abs().max().item<double>() <= 1e-5 * scale);
        }
      }
}

TEST_CASE("families that cannot pack say so", "[unit][padding_free]") {
  CHECK(!hftrain_test::build_model("bert_mlm", "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 1, "
                                               "num_attention_heads: 4, intermediate_size: 48, max_position_embeddings: 16}")
             ->supports_padding_free());
  CHECK(hftrain_test::build_model("t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 1, num_heads: 4}")
            ->supports_padding_free());
  CHECK(hftrain_test::build_model("gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 1, n_head: 4}")
            ->supports_padding_free());
}
