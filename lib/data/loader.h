// Sampling and collation: turns a Dataset into Batches. The shuffle order of an epoch is
// torch.randperm(n, generator seeded with data_seed + epoch), as accelerate's seedable sampler does,
// so a Python reference can reproduce it exactly. State = {epoch, samples of its order consumed}.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "models/model.h"

namespace hftrain {

// Stacks examples into a Batch with dynamic padding (HF DataCollatorWithPadding): token sequences are
// padded to the longest in the batch with options.pad_id, attention_mask 0 and labels -100 there;
// token_type_ids are collated (padded with 0) when the examples carry them. For kMaskedLm the labels are
// made by mask_tokens with a generator seeded with `mlm_seed`.
Batch collate(const std::vector<Example>& examples, TaskKind task, const CollateOptions& options = {},
              uint64_t mlm_seed = 0);

// HF DataCollatorForLanguageModeling.torch_mask_tokens on a padded batch: each position that is not
// special (special_mask 1) and not padding (attention_mask 0) is selected with probability
// options.mlm_probability; labels keep the original id at selected positions and -100 elsewhere; of the
// selected, 80% become mask_id, half of the rest a random id in [0, vocab_size), the rest stay. The
// same draws as HF (bernoulli, bernoulli 0.8, bernoulli 0.5, randint) from one generator.
void mask_tokens(Batch& batch, const torch::Tensor& special_mask, const CollateOptions& options, uint64_t seed);

// The seed of the MLM masking of one batch: a function of (data seed, epoch, batch index), so a resumed
// run masks every batch exactly as the uninterrupted run.
uint64_t batch_mask_seed(int64_t seed, int64_t epoch, int64_t batch_index);

// HF get_length_grouped_indices over a given permutation `perm` of 0..n-1: megabatches of
// mega_batch_mult * batch_size consecutive entries of perm (mega_batch_mult = min(n / (4 * batch_size), 50),
// at least 1), each sorted by length descending (stable), then the longest example overall is swapped
// to the very first position (so an out-of-memory shows at once).
std::vector<int64_t> length_grouped_indices(const std::vector<int64_t>& lengths, int64_t batch_size,
                                            const std::vector<int64_t>& perm);

// The legacy Seq2SeqTrainer's sortish sampling (fastai's SortishSampler) over a permutation `perm`: chunks
// of 50 * batch_size consecutive entries, each sorted by length descending (stable); cut into batches of
// batch_size; the batch whose first example is the longest goes first, the other batches follow in an
// order drawn with torch.randperm from a generator seeded with `seed`.
std::vector<int64_t> sortish_indices(const std::vector<int64_t>& lengths, int64_t batch_size,
                                     const std::vector<int64_t>& perm, uint64_t seed);

// Epoch order of `n` examples: a seeded permutation when shuffling, 0..n-1 otherwise.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, int64_t seed, int64_t epoch);

// torch.utils.data.DistributedSampler over an epoch order: without drop_last the order is padded by
// repeating its start up to a multiple of num_replicas, with drop_last its tail is cut off; then rank r
// takes every num_replicas-th index starting at r. Every rank shuffles with the same seed, so the ranks'
// shards are disjoint and together cover the epoch.
// `skip` (resume): the first `skip` entries of `order` were consumed already; the rest is dealt out the same
// way, padded (without drop_last) by repeating the start of `order`. With `skip` a multiple of num_replicas
// each rank's shard is exactly the tail of its unskipped shard.
std::vector<int64_t> distributed_shard(const std::vector<int64_t>& order, int64_t num_replicas, int64_t rank,
                                       bool drop_last, int64_t skip = 0);

class DataLoader {
 public:
  // With num_replicas > 1 the loader yields this rank's DistributedSampler shard of every epoch (padded,
  // as HF's Trainer builds its sampler); drop_last then applies to the rank's last batch.
  DataLoader(std::shared_ptr<const Dataset> dataset, TaskKind task, int64_t batch_size, bool shuffle, int64_t seed,
             bool drop_last, int64_t num_replicas = 1, int64_t rank = 0);
  int64_t batches_per_epoch() const;
  int64_t num_examples() const { return dataset_->size(); }
  // Examples this rank sees per epoch (num_examples() with one replica).
  int64_t examples_per_replica() const;
  // HF group_by_length: every epoch's order becomes length_grouped_indices over that epoch's seeded
  // permutation; `group_batch_size` is HF's per-device batch size x gradient_accumulation_steps;
  // lengths come from dataset->lengths(length_column_name). Sharded afterwards when distributed.
  void group_by_length(int64_t group_batch_size, const std::string& length_column_name);
  // Seq2SeqTrainingArguments.sortish_sampler: every epoch's order becomes sortish_indices over that epoch's
  // seeded permutation (lengths as for group_by_length). Sharded afterwards when distributed.
  void sortish(int64_t batch_size, const std::string& length_column_name);
  // training.padding_free: each batch is one row of its examples (flatten_examples, data/packing.h)
  // instead of a padded [batch, longest] block.
  void flatten_batches() { flatten_ = true; }
  // distributed.sequence_parallel_size: every batch becomes slice `index` of `parts` of its rows
  // (data/sequence_slices.h); the ranks of a group read the same batches. Causal-LM data only (ConfigError).
  void slice_sequences(int64_t parts, int64_t index);
  // Starts `epoch`, skipping the first `skip_samples` samples of its order (resume): those consumed by every
  // rank together, a prefix of the epoch's order whatever world size and batch size consumed it. The rest is
  // sharded over this loader's replicas; its batches keep the indices (MLM seeds) of their positions.
  void start_epoch(int64_t epoch, int64_t skip_samples = 0);
  // Batches each rank reads of an epoch after its first `skip_samples` samples (batches_per_epoch() for 0).
  int64_t batches_after(int64_t skip_samples) const;
  // The epoch's samples consumed (all ranks together) once every rank has read `batches` batches after
  // `skip_samples`: skip_samples + batches * batch size * replicas, capped at the end of the epoch.
  int64_t samples_consumed_after(int64_t skip_samples, int64_t batches) const;
  // Samples of the epoch's order that are consumed by one batch of every rank.
  int64_t samples_per_batch() const { return batch_size_ * num_replicas_; }
  // Fills `batch` with the next batch of the current epoch (and `examples`, when given, with its examples);
  // false at the end of the epoch.
  bool next(Batch& batch, std::vector<Example>* examples = nullptr);
  // Examples of the current batch position, in order (for prediction output).
  std::vector<Example> next_examples();

 private:
  std::shared_ptr<const Dataset> dataset_;
  TaskKind task_;
  int64_t batch_size_;
  bool shuffle_;
  int64_t seed_;
  bool drop_last_;
  int64_t num_replicas_ = 1;
  int64_t rank_ = 0;
  CollateOptions collate_options_;
  bool flatten_ = false;
  int64_t sequence_parts_ = 1, sequence_index_ = 0;
  int64_t epoch_ = 0;
  enum class LengthOrder { kNone, kGroupByLength, kSortish };
  LengthOrder length_order_ = LengthOrder::kNone;
  int64_t group_batch_size_ = 0;  // the batch size the length order groups by
  std::vector<int64_t> lengths_;
  void read_lengths(const std::string& what, int64_t group_batch_size, const std::string& length_column_name);
  // This rank's examples of an epoch after `skip_samples` (its shard's length).
  int64_t examples_after(int64_t skip_samples) const;
  std::vector<int64_t> order_;
  int64_t position_ = 0;
  int64_t batch_offset_ = 0;  // the index of the epoch's first batch not skipped
};

}  // namespace hftrain
