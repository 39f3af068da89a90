// Padding-free batches (training.padding_free; data/packing.h): the flattened row's layout (HF
// DataCollatorWithFlattening: positions restarting per example, the first label of each example -100),
// and for every family that packs (gpt, gpt2, llama) the loss and every parameter gradient of the packed
// micro-batch against the padded one (whose numerics tests/reference/hf_models_reference.py checks
// against an independent forward), with the chunked loss on and off and with gradient checkpointing.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "data/loader.h"
#include "data/packing.h"
#include "models/model.h"
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

double max_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
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
        auto run = [&](Batch batch) {
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
        };
        CollateOptions pad;
        pad.pad_id = 1;
        const auto padded = run(collate(examples(), TaskKind::kCausalLm, pad));
        const auto packed = run(flatten_examples(examples()));
        REQUIRE(padded.size() == packed.size());
        for (const auto& [name, expected] : padded) {
          INFO(name);
          CHECK(max_relative_difference(packed.at(name), expected) < 1e-5);
        }
      }
}

TEST_CASE("families that cannot pack say so", "[unit][padding_free]") {
  CHECK(!hftrain_test::build_model("bert_mlm", "{vocab_size: 31, hidden_size: 32, num_hidden_layers: 1, "
                                               "num_attention_heads: 4, intermediate_size: 48, max_position_embeddings: 16}")
             ->supports_padding_free());
  CHECK(!hftrain_test::build_model("t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 1, num_heads: 4}")
             ->supports_padding_free());
  CHECK(hftrain_test::build_model("gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 1, n_head: 4}")
            ->supports_padding_free());
}
