// Ulysses sequence parallelism wired through a run (distributed.sequence_parallel_size): a batch's slices (labels
// shifted on the whole rows, global positions, padding to a multiple of the group, a padding-free row's examples
// kept whole), the spec's settings and refusals, and on 2 processes the llama-like decoder's loss and every
// parameter gradient with its attention exchanged over the group equal to one process over the whole batch
// (padded and padding-free, grouped-query heads, a sliding window with checkpointing, qwen3's q / k norms, phi3's fused
// projections and partial rotary, gemma2's soft-caps and sandwich norms, dynamic rotary scaling),
// and the models and layouts that cannot run it refused by name.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "data/loader.h"
#include "data/packing.h"
#include "data/sequence_slices.h"
#include "dist_workers.h"
#include "distributed/parallel_layout.h"
#include "models/sequence_parallel.h"
#include "seq2seq_model_helpers.h"
#include "spec_test_helpers.h"
#include "train/loss_normaliser.h"
#include "scratch_files.h"

using hftrain_test::write_spec;

using namespace hftrain;
using hftrain_test::run_workers;
using hftrain_test::worker_comm;

namespace {

// Causal-LM examples of the given lengths (ids 2..26); labels are the ids but for a prompt of 2 in the second.
std::vector<Example> examples(const std::vector<int64_t>& lengths) {
  std::vector<Example> out;
  int64_t next = 3;
  for (const int64_t n : lengths) {
    Example e;
    for (int64_t t = 0; t < n; ++t) e.input_ids.push_back(next++ % 25 + 2);
    e.labels = e.input_ids;
    out.push_back(e);
  }
  if (out.size() > 1)
    for (std::size_t t = 0; t < 2 && t < out[1].labels.size(); ++t) out[1].labels[t] = -100;
  return out;
}

// The slices of `whole` put back side by side along the sequence.
Batch joined(const Batch& whole, int64_t parts, int64_t pad_id) {
  std::vector<torch::Tensor> ids, labels, positions, masks;
  for (int64_t i = 0; i < parts; ++i) {
    const Batch s = slice_sequences(whole, parts, i, pad_id);
    ids.push_back(s.input_ids), labels.push_back(s.labels), positions.push_back(s.position_ids), masks.push_back(s.attention_mask);
  }
  Batch b;
  b.input_ids = torch::cat(ids, 1), b.labels = torch::cat(labels, 1), b.position_ids = torch::cat(positions, 1);
  b.attention_mask = torch::cat(masks, 1);
  return b;
}

// A dataset of given examples.
class ExampleList : public Dataset {
 public:
  explicit ExampleList(std::vector<Example> examples) : examples_(std::move(examples)) {}
  int64_t size() const override { return static_cast<int64_t>(examples_.size()); }
  Example get(int64_t index) const override { return examples_.at(static_cast<std::size_t>(index)); }

 private:
  std::vector<Example> examples_;
};

std::string llama_spec(const std::string& extra) {
  return "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 4, "
         "num_key_value_heads: 2}\ndata: {type: digit_reversal}\ntraining: {output_dir: /tmp/x}\n" + extra;
}

}  // namespace

TEST_CASE("a padded batch's sequence-parallel slices: labels shifted on the whole rows, global positions, padded to "
          "the group", "[unit][sequence_parallel]") {
  const Batch whole = collate(examples({5, 3}), TaskKind::kCausalLm, CollateOptions{});  // [2, 5]
  const Batch first = slice_sequences(whole, 2, 0, 0), second = slice_sequences(whole, 2, 1, 0);
  CHECK(first.input_ids.sizes() == torch::IntArrayRef({2, 3}));  // 5 tokens padded to 6, 3 per slice
  CHECK(first.sliced());
  CHECK(second.slice.index == 1);
  CHECK(second.slice.length == 5);
  CHECK(second.slice.attention_mask.sizes() == torch::IntArrayRef({2, 6}));
  const Batch all = joined(whole, 2, 0);
  // Each position's target is the next token's label; the last one (and the padding) score nothing.
  const auto shifted = torch::cat({whole.labels.slice(1, 1), torch::full({2, 2}, -100, torch::kLong)}, 1);
  CHECK(all.labels.equal(shifted));
  CHECK(all.input_ids.slice(1, 0, 5).equal(whole.input_ids));
  CHECK(all.input_ids.select(1, 5).equal(torch::zeros({2}, torch::kLong)));
  CHECK(all.attention_mask.equal(torch::cat({whole.attention_mask, torch::zeros({2, 1}, torch::kLong)}, 1)));
  CHECK(all.position_ids.equal(torch::arange(6, torch::kLong).view({1, 6})));
  // The boundary token (position 2 of the first slice) is scored against position 3, which the other slice holds.
  CHECK(first.labels[0][2].item<int64_t>() == whole.labels[0][3].item<int64_t>());
  // The slices score the whole batch's label tokens between them.
  const int64_t scored = whole.labels.slice(1, 1).ne(-100).sum().item<int64_t>();
  CHECK(first.labels.ne(-100).sum().item<int64_t>() + second.labels.ne(-100).sum().item<int64_t>() == scored);
  // One part leaves the rows whole but shifted.
  const Batch one = slice_sequences(whole, 1, 0, 0);
  CHECK_FALSE(one.sliced());
}

TEST_CASE("a padding-free row's sequence-parallel slices keep its examples whole and the padding one of its own",
          "[unit][sequence_parallel]") {
  const Batch whole = flatten_examples(examples({3, 4, 2}));  // [1, 9], positions 0 1 2 0 1 2 3 0 1
  const Batch first = slice_sequences(whole, 2, 0, 7);
  CHECK(first.packed_lengths == std::vector<int64_t>{3, 4, 2, 1});
  CHECK(first.slice.length == 4);  // the longest example: the positions the row reaches
  const Batch all = joined(whole, 2, 7);
  CHECK(all.position_ids.equal(torch::tensor({0, 1, 2, 0, 1, 2, 3, 0, 1, 0}, torch::kLong).view({1, 10})));
  CHECK(all.input_ids.select(1, 9).item<int64_t>() == 7);
  // An example's last token predicts nothing across the boundary: the next example's first label is -100.
  CHECK(all.labels.equal(torch::cat({whole.labels.slice(1, 1), torch::full({1, 2}, -100, torch::kLong)}, 1)));
  CHECK(all.labels[0][2].item<int64_t>() == -100);
  // A row that divides evenly gets no padding example.
  CHECK(slice_sequences(flatten_examples(examples({3, 3})), 2, 1, 0).packed_lengths == std::vector<int64_t>{3, 3});
}

TEST_CASE("distributed.sequence_parallel_size: DeepSpeed's key, the world it needs and the settings it refuses",
          "[unit][sequence_parallel]") {
  using hftrain_test::has_note;
  using hftrain_test::load;
  using hftrain_test::load_error;
  RunSpec spec = load(write_spec("sp.yaml", llama_spec("distributed: {sequence_parallel_size: 2}\n")));
  CHECK(spec.distributed.sequence_parallel_size == 2);
  CHECK(has_note(spec, "evaluation and generation run whole sequences"));
  CHECK(load(write_spec("plain.yaml", llama_spec(""))).distributed.sequence_parallel_size == 1);
  // DeepSpeed's top-level sequence_parallel_size lands in the distributed section.
  const std::string ds = llama_spec("").replace(llama_spec("").find("output_dir: /tmp/x"), 18,
                                                "output_dir: /tmp/x, deepspeed: {sequence_parallel_size: 2}");
  CHECK(load(write_spec("ds.yaml", ds)).distributed.sequence_parallel_size == 2);
  CHECK_THAT(load_error(write_spec("zero.yaml", llama_spec("distributed: {sequence_parallel_size: 0}\n"))),
             Catch::Contains("distributed.sequence_parallel_size"));
  const std::string neftune = llama_spec("distributed: {sequence_parallel_size: 2}\n");
  CHECK_THAT(load_error(write_spec("neftune.yaml", neftune), {"training.neftune_noise_alpha=5"}),
             Catch::Contains("training.neftune_noise_alpha") && Catch::Contains("sequence_parallel_size 2"));
  // Accelerate's ParallelismConfig as its config file writes it (the docs' 2-process Ulysses file).
  const std::string accelerate = write_spec("accelerate.yaml",
                                            "distributed_type: DEEPSPEED\nnum_machines: 1\nnum_processes: 2\n"
                                            "deepspeed_config: {zero_stage: 1, seq_parallel_communication_data_type: bf16}\n"
                                            "parallelism_config:\n  parallelism_config_dp_replicate_size: 1\n"
                                            "  parallelism_config_sp_size: 2\n  parallelism_config_sp_backend: deepspeed\n"
                                            "  parallelism_config_sp_seq_length_is_variable: true\n"
                                            "  parallelism_config_sp_attn_implementation: sdpa\n");
  const std::string with_accelerate = llama_spec("distributed: {accelerate_config: " + accelerate + "}\n");
  CHECK(load(write_spec("with_accelerate.yaml", with_accelerate)).distributed.sequence_parallel_size == 2);
  const std::string tensor_parallel = write_spec("accelerate_tp.yaml",
                                                 "distributed_type: MULTI_CPU\nnum_processes: 2\nparallelism_config:\n"
                                                 "  parallelism_config_tp_size: 2\n");
  CHECK_THAT(load_error(write_spec("with_tp.yaml", llama_spec("distributed: {accelerate_config: " + tensor_parallel + "}\n"))),
             Catch::Contains("parallelism_config.parallelism_config_tp_size") && Catch::Contains("tensor parallelism"));
  // One process cannot hold a group of 2; the message names both numbers.
  LocalComm one;
  CHECK_THAT(hftrain_test::config_error([&] { make_parallel_layout(one, 2); }),
             Catch::Contains("sequence_parallel_size: 2 must divide the world size 1"));
  CHECK(make_parallel_layout(one, 1).data_parallel_size == 1);
  // Slices are of causal-LM sequences only.
  auto dataset = std::make_shared<ExampleList>(examples({3, 4}));
  DataLoader classification(dataset, TaskKind::kClassification, 2, false, 0, false);
  CHECK_THAT(hftrain_test::config_error([&] { classification.slice_sequences(2, 0); }),
             Catch::Contains("slices causal-LM sequences"));
}

// ---- on 2 processes -------------------------------------------------------------------------------

namespace {

// Loss and every parameter gradient of `type` on `batch` (denominator: the whole batch's label tokens), with the
// attention over `sp` when given; the gradients of a slice are summed over the group, as the engine reduces them.
std::map<std::string, torch::Tensor> loss_and_gradients(const std::string& type, const std::string& options,
                                                        const Batch& batch, double denominator, bool checkpointing,
                                                        const std::shared_ptr<SequenceParallel>& sp, Comm* group) {
  auto model = hftrain_test::build_model(type, options, 5);
  model->set_lm_loss({true, 16});
  if (checkpointing) model->enable_gradient_checkpointing();
  if (sp) model->set_sequence_parallel(sp);
  model->train();
  Batch b = batch;
  b.loss_denominator = denominator;
  ModelOutput out = model->forward(b);
  out.loss.backward();
  std::map<std::string, torch::Tensor> result = {{"loss", out.loss.detach().reshape({1}).clone()}};
  for (auto& np : model->named_parameters()) result[np.key()] = np.value().grad().clone();
  if (group)
    for (auto& [name, t] : result) group->all_reduce(t, ReduceOp::kSum, "test " + name);
  return result;
}

}  // namespace

TEST_CASE("dist worker: sequence-parallel decoder", "[.dist_worker]") {
  auto comm = worker_comm();
  const ParallelLayout layout = make_parallel_layout(*comm, 2);
  REQUIRE(layout.sequence_group);
  CHECK(layout.data_parallel_size == 1);
  CHECK(layout.sequence_rank == comm->rank());
  auto sp = std::make_shared<SequenceParallel>(layout.sequence_group);
  const std::string llama = "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, "
                            "num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64}";
  struct Case {
    std::string name, type, options;
    Batch batch;
    bool checkpointing;
  };
  const std::vector<Case> cases = {
      {"llama, grouped-query heads, padded", "llama", llama, collate(examples({13, 7, 10}), TaskKind::kCausalLm, {}), false},
      {"llama, padding-free", "llama", llama, flatten_examples(examples({6, 9, 4})), false},
      {"mistral, a window of 5, checkpointed", "mistral",
       "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
       "num_key_value_heads: 2, max_position_embeddings: 64, sliding_window: 5}",
       collate(examples({11, 8}), TaskKind::kCausalLm, {}), true},
      {"qwen3, per-head q / k norms, head_dim 12", "qwen3",
       "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
       "num_key_value_heads: 2, head_dim: 12, max_position_embeddings: 64}",
       collate(examples({9, 12}), TaskKind::kCausalLm, {}), false},
      {"phi3, fused qkv_proj, partial rotary, padding-free", "phi3",
       "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
       "num_key_value_heads: 2, max_position_embeddings: 64, partial_rotary_factor: 0.5}",
       flatten_examples(examples({5, 8, 6})), false},
      {"gemma2, soft-caps, sandwich norms, a window of 4", "gemma2",
       "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
       "num_key_value_heads: 2, head_dim: 8, max_position_embeddings: 64, sliding_window: 4, "
       "attn_logit_softcapping: 2.0, final_logit_softcapping: 5.0}",
       collate(examples({10, 7}), TaskKind::kCausalLm, {}), false},
      {"llama, dynamic rotary past its 8 positions", "llama",
       "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 1, num_attention_heads: 4, "
       "num_key_value_heads: 4, max_position_embeddings: 8, rope_scaling: {rope_type: dynamic, factor: 2.0}}",
       collate(examples({15, 6}), TaskKind::kCausalLm, {}), false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const auto scored = static_cast<double>(c.batch.labels.slice(1, 1).ne(-100).sum().item<int64_t>());
    const auto whole = loss_and_gradients(c.type, c.options, c.batch, scored, c.checkpointing, nullptr, nullptr);
    const Batch mine = slice_sequences(c.batch, 2, layout.sequence_rank, 0);
    auto count = torch::tensor({mine.labels.ne(-100).sum().item<int64_t>()}, torch::kLong);
    layout.sequence_group->all_reduce(count, ReduceOp::kSum, "test label tokens");
    CHECK(count.item<int64_t>() == static_cast<int64_t>(scored));
    const auto split = loss_and_gradients(c.type, c.options, mine, scored, c.checkpointing, sp, layout.sequence_group.get());
    REQUIRE(split.size() == whole.size());
    for (const auto& [name, expected] : whole) {
      INFO(name);
      const auto got = split.at(name);
      const double scale = expected.abs().max().item<double>();
      CHECK(scale > 0);
      CHECK((got - expected).abs().max().item<double>() <= 1e-5 * scale);
    }
  }
  {  // The step's label tokens of the slices: summed over the world, or over the group without
     // average_tokens_across_devices; either way the whole batch's, each slice's loss scaled by the ranks.
    INFO("loss normaliser");
    auto model = hftrain_test::build_model("llama", llama, 5);
    const Batch& whole = cases[0].batch;
    const int64_t scored = whole.labels.slice(1, 1).ne(-100).sum().item<int64_t>();
    for (const bool across : {true, false}) {
      std::vector<Batch> window = {slice_sequences(whole, 2, layout.sequence_rank, 0)};
      int64_t seen = 0;
      LossNormaliser normaliser(*model, across, *comm, layout.sequence_group.get());
      const LossScale scale = normaliser.prepare(window, seen, false);
      CHECK(window[0].loss_denominator == static_cast<double>(scored));
      CHECK(scale.multiplier == 2.0);
      CHECK(scale.divisor == 1.0);
    }
  }
  // What cannot run sequence parallel is refused by name.
  using hftrain_test::build_model;
  using hftrain_test::config_error;
  CHECK_THAT(config_error([&] {
               build_model("llama", "{vocab_size: 32, hidden_size: 36, intermediate_size: 48, num_hidden_layers: 1, "
                                    "num_attention_heads: 6, num_key_value_heads: 3, max_position_embeddings: 32}")
                   ->set_sequence_parallel(sp);
             }),
             Catch::Contains("sequence_parallel_size 2 must divide") && Catch::Contains("num_attention_heads 6") &&
                 Catch::Contains("num_key_value_heads 3"));
  CHECK_THAT(config_error([&] { build_model("gpt2", "{vocab_size: 32, n_layer: 1, n_head: 2, n_embd: 16, n_positions: 32}")->set_sequence_parallel(sp); }),
             Catch::Contains("model type 'gpt2' is not a llama-like decoder"));
  CHECK_THAT(config_error([&] {
               build_model("mixtral", "{vocab_size: 32, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 1, "
                                      "num_attention_heads: 4, num_key_value_heads: 2, num_local_experts: 2, "
                                      "num_experts_per_tok: 1, max_position_embeddings: 32}")
                   ->set_sequence_parallel(sp);
             }),
             Catch::Contains("routed experts of mixtral"));
  CHECK_THAT(config_error([&] { make_parallel_layout(*comm, 3); }), Catch::Contains("3 must divide the world size 2"));
}

TEST_CASE("the llama-like decoder's loss and every gradient with Ulysses over 2 processes equal one process",
          "[unit][dist][sequence_parallel]") {
  CHECK(run_workers("dist worker: sequence-parallel decoder", 2) == 0);
}

// Issue 62's proof at length: a grouped-query llama over 4096 positions, padded (two rows) and padding-free (three
// examples in one row, checkpointed), its loss and every parameter gradient on a group of the whole world (2 or 4
// ranks) against one process over the whole batch.
TEST_CASE("dist worker: sequence-parallel llama over 4k tokens", "[.dist_worker]") {
  auto comm = worker_comm(120000);
  const int64_t P = comm->world_size();
  const ParallelLayout layout = make_parallel_layout(*comm, P);
  auto sp = std::make_shared<SequenceParallel>(layout.sequence_group);
  const std::string llama = "{vocab_size: 32, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, "
                            "num_attention_heads: 8, num_key_value_heads: 4, max_position_embeddings: 4096}";
  const std::vector<std::pair<Batch, bool>> cases = {
      {collate(examples({4096, 3001}), TaskKind::kCausalLm, {}), false},
      {flatten_examples(examples({1700, 1400, 996})), true},
  };
  for (const auto& [batch, checkpointing] : cases) {
    INFO((checkpointing ? "padding-free, checkpointed" : "padded") << ", sequence_parallel_size " << P);
    REQUIRE(batch.input_ids.size(1) == 4096);
    const auto scored = static_cast<double>(batch.labels.slice(1, 1).ne(-100).sum().item<int64_t>());
    const auto whole = loss_and_gradients("llama", llama, batch, scored, checkpointing, nullptr, nullptr);
    const Batch mine = slice_sequences(batch, P, layout.sequence_rank, 0);
    CHECK(mine.input_ids.size(1) == 4096 / P);
    const auto split = loss_and_gradients("llama", llama, mine, scored, checkpointing, sp, layout.sequence_group.get());
    REQUIRE(split.size() == whole.size());
    for (const auto& [name, expected] : whole) {
      INFO(name);
      const double scale = expected.abs().max().item<double>();
      CHECK(scale > 0);
      CHECK((split.at(name) - expected).abs().max().item<double>() <= 1e-5 * scale);
    }
  }
}

TEST_CASE("a grouped-query llama over 4096 positions, padded and padding-free, on sequence-parallel groups of 2 and 4 "
          "processes: loss and every gradient as one process",
          "[unit][dist][sequence_parallel]") {
  for (int n : {2, 4}) {
    INFO("world size " << n);
    CHECK(run_workers("dist worker: sequence-parallel llama over 4k tokens", n) == 0);
  }
}
