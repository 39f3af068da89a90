// The token-exact loss pieces (HF >= 4.46): which label tokens a model's loss scores, the sum / count form
// of the losses, and LossNormaliser's denominators and scale for one worker and for two (the second
// worker simulated by a communicator that adds its counts). The whole rule against a full-batch
// reference through the binary: tests/reference/token_loss_reference.py.
#include <catch2/catch.hpp>

#include "seq2seq_model_helpers.h"
#include "train/loss_normaliser.h"

using namespace hftrain;
using hftrain_test::build_model;

namespace {

// A world of two in which the other worker's counts are `other` (label tokens, input tokens).
class TwoWorkerComm : public LocalComm {
 public:
  explicit TwoWorkerComm(std::vector<int64_t> other) : other_(std::move(other)) {}
  int world_size() const override { return 2; }
  std::unique_ptr<PendingOp> all_reduce_async(torch::Tensor t, ReduceOp op, const std::string& what) override {
    t.add_(torch::tensor(other_, torch::kInt64));
    ++reductions;
    return LocalComm::all_reduce_async(t, op, what);
  }
  int reductions = 0;

 private:
  std::vector<int64_t> other_;
};

Batch lm_batch(std::vector<std::vector<int64_t>> labels_rows) {
  Batch b;
  const auto T = static_cast<int64_t>(labels_rows.front().size());
  b.labels = torch::full({static_cast<int64_t>(labels_rows.size()), T}, -100, torch::kInt64);
  for (std::size_t i = 0; i < labels_rows.size(); ++i)
    for (int64_t t = 0; t < T; ++t) b.labels[static_cast<int64_t>(i)][t] = labels_rows[i][static_cast<std::size_t>(t)];
  b.input_ids = b.labels.clamp_min(0);
  b.attention_mask = b.labels.ne(-100).to(torch::kInt64);
  return b;
}

const char* const kGpt = "{n_layer: 1, n_head: 2, n_embd: 8, vocab_size: 11, block_size: 8}";

}  // namespace

TEST_CASE("scored label tokens: after the causal shift for causal LMs, all of them for seq2seq", "[unit][loss]") {
  auto gpt = build_model("gpt", kGpt);
  const Batch b = lm_batch({{1, 2, 3, -100}, {4, -100, -100, -100}, {-100, 5, 6, 7}});
  // Causal: labels[:, 1:] != -100 -> 2 + 0 + 3.
  CHECK(scored_label_tokens(*gpt, b) == 5);
  auto t5 = build_model("t5", "{vocab_size: 11, d_model: 8, d_kv: 4, d_ff: 16, num_layers: 1, num_heads: 2, dropout_rate: 0}");
  CHECK(t5->loss_unit() == LossUnit::kLabelToken);
  CHECK(scored_label_tokens(*t5, b) == 7);  // no shift: every label != -100
  auto mlp = build_model("mlp", "{hidden_sizes: [4], num_features: 3, num_labels: 2}");
  CHECK(mlp->loss_unit() == LossUnit::kExample);
  Batch cls;
  cls.labels = torch::tensor({0, 1}, torch::kInt64);
  CHECK(scored_label_tokens(*mlp, cls) == 0);
}

TEST_CASE("token losses as a sum over a given count equal the mean when the count is the batch's own", "[unit][loss]") {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({2, 5, 7});
  const torch::Tensor labels = torch::tensor({{1, 2, -100, 4, 5}, {-100, 6, 0, -100, -100}}, torch::kInt64);
  const double own = static_cast<double>(labels.slice(1, 1).ne(-100).sum().item<int64_t>());
  CHECK(causal_lm_loss(logits, labels, own).item<double>() == Approx(causal_lm_loss(logits, labels).item<double>()).epsilon(1e-6));
  // Twice the count: half the loss (the sum is divided by the step's count, not the batch's).
  CHECK(causal_lm_loss(logits, labels, 2 * own).item<double>() ==
        Approx(causal_lm_loss(logits, labels).item<double>() / 2).epsilon(1e-6));
  CHECK(label_smoothed_loss(logits, labels, 0.1, true, own).item<double>() ==
        Approx(label_smoothed_loss(logits, labels, 0.1, true).item<double>()).epsilon(1e-6));
  // All labels ignored: a zero loss (and zero gradients), not 0 / 0.
  const torch::Tensor none = torch::full({2, 5}, -100, torch::kInt64);
  CHECK(causal_lm_loss(logits, none, 1.0).item<double>() == 0.0);
}

TEST_CASE("LossNormaliser: the step's label tokens divide every micro-batch, summed over workers", "[unit][loss]") {
  auto gpt = build_model("gpt", kGpt);
  std::vector<Batch> window = {lm_batch({{1, 2, 3, 4}}), lm_batch({{1, 2, -100, -100}, {3, 4, 5, -100}})};
  int64_t tokens = 11;
  SECTION("one worker: the window's count, no other scale") {
    LocalComm comm;
    LossNormaliser n(*gpt, true, comm);
    const LossScale s = n.prepare(window, tokens, true);
    CHECK(window[0].loss_denominator == 3 + 1 + 2);
    CHECK(window[1].loss_denominator == 6);
    CHECK(s.multiplier == 1.0);
    CHECK(s.divisor == 1.0);
    CHECK(tokens == 11);
  }
  SECTION("two workers: summed counts and the world size as multiplier; one collective for both counts") {
    TwoWorkerComm comm({10, 100});
    LossNormaliser n(*gpt, true, comm);
    const LossScale s = n.prepare(window, tokens, true);
    CHECK(window[0].loss_denominator == 16);
    CHECK(s.multiplier == 2.0);
    CHECK(tokens == 111);
    CHECK(comm.reductions == 1);
  }
  SECTION("average_tokens_across_devices false: this worker's own count") {
    TwoWorkerComm comm({10, 100});
    LossNormaliser n(*gpt, false, comm);
    const LossScale s = n.prepare(window, tokens, false);
    CHECK(window[1].loss_denominator == 6);
    CHECK(s.multiplier == 1.0);
    CHECK(comm.reductions == 0);
  }
  SECTION("per-example losses keep the mean over the window") {
    auto mlp = build_model("mlp", "{hidden_sizes: [4], num_features: 3, num_labels: 2}");
    LocalComm comm;
    LossNormaliser n(*mlp, true, comm);
    const LossScale s = n.prepare(window, tokens, false);
    CHECK(window[0].loss_denominator == 0);
    CHECK(s.divisor == 2.0);
  }
}
