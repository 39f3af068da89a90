// Sampling and collation: turns a Dataset into Batches. The shuffle order of an epoch is
// torch.randperm(n, generator seeded with data_seed + epoch), as accelerate's seedable sampler does,
// so a Python reference can reproduce it exactly. State = {epoch, batch position}.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "models/model.h"

namespace hftrain {

// Stacks examples into a Batch, padding token sequences to the longest (pad id 0, labels -100,
// attention_mask 0).
Batch collate(const std::vector<Example>& examples, TaskKind task);

// Epoch order of `n` examples: a seeded permutation when shuffling, 0..n-1 otherwise.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, int64_t seed, int64_t epoch);

// torch.utils.data.DistributedSampler over an epoch order: without drop_last the order is padded by
// repeating its start up to a multiple of num_replicas, with drop_last its tail is cut off; then rank r
// takes every num_replicas-th index starting at r. Every rank shuffles with the same seed, so the ranks'
// shards are disjoint and together cover the epoch.
std::vector<int64_t> distributed_shard(const std::vector<int64_t>& order, int64_t num_replicas, int64_t rank,
                                       bool drop_last);

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
  // Starts `epoch`, skipping its first `skip_batches` batches (resume).
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // Fills `batch` with the next batch of the current epoch; false at the end of the epoch.
  bool next(Batch& batch);
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
  std::vector<int64_t> order_;
  int64_t position_ = 0;
};

}  // namespace hftrain
