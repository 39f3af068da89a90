// Collation and sampling (see loader.h).
#include "data/loader.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {

Batch collate(const std::vector<Example>& examples, TaskKind task) {
  Batch b;
  const auto B = static_cast<int64_t>(examples.size());
  if (B == 0) return b;
  if (!examples[0].features.empty()) {
    const auto D = static_cast<int64_t>(examples[0].features.size());
    b.features = torch::empty({B, D}, torch::kFloat32);
    auto f = b.features.accessor<float, 2>();
    for (int64_t i = 0; i < B; ++i) {
      if (static_cast<int64_t>(examples[i].features.size()) != D)
        throw RuntimeFailure("collate: examples have different feature widths");
      for (int64_t j = 0; j < D; ++j) f[i][j] = examples[i].features[j];
    }
  }
  if (!examples[0].input_ids.empty()) {
    int64_t T = 0;
    for (const auto& e : examples) T = std::max<int64_t>(T, static_cast<int64_t>(e.input_ids.size()));
    b.input_ids = torch::zeros({B, T}, torch::kLong);
    b.attention_mask = torch::zeros({B, T}, torch::kLong);
    auto ids = b.input_ids.accessor<int64_t, 2>();
    auto mask = b.attention_mask.accessor<int64_t, 2>();
    for (int64_t i = 0; i < B; ++i)
      for (std::size_t t = 0; t < examples[i].input_ids.size(); ++t) {
        ids[i][t] = examples[i].input_ids[t];
        mask[i][t] = 1;
      }
    if (task == TaskKind::kCausalLm) {
      b.labels = torch::full({B, T}, -100, torch::kLong);
      auto lab = b.labels.accessor<int64_t, 2>();
      for (int64_t i = 0; i < B; ++i)
        for (std::size_t t = 0; t < examples[i].labels.size(); ++t) lab[i][t] = examples[i].labels[t];
    }
  }
  if (task == TaskKind::kClassification) {
    b.labels = torch::empty({B}, torch::kLong);
    for (int64_t i = 0; i < B; ++i) b.labels[i] = examples[i].label;
  }
  return b;
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, int64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  if (!shuffle) {
    for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    return order;
  }
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed + epoch));
  auto perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kLong));
  std::copy(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n, order.begin());
  return order;
}

std::vector<int64_t> distributed_shard(const std::vector<int64_t>& order, int64_t num_replicas, int64_t rank,
                                       bool drop_last) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw RuntimeFailure("distributed sampler: rank " + std::to_string(rank) + " is not in [0, " +
                         std::to_string(num_replicas) + ")");
  const auto n = static_cast<int64_t>(order.size());
  // torch DistributedSampler.__init__ / __iter__ (torch 1.13).
  const int64_t num_samples = drop_last && n % num_replicas != 0 ? (n - num_replicas + num_replicas - 1) / num_replicas
                                                                 : (n + num_replicas - 1) / num_replicas;
  const int64_t total = num_samples * num_replicas;
  std::vector<int64_t> indices(order);
  if (!drop_last) {
    for (int64_t i = 0; n > 0 && static_cast<int64_t>(indices.size()) < total; ++i)
      indices.push_back(order[static_cast<std::size_t>(i % n)]);
  } else {
    indices.resize(static_cast<std::size_t>(std::max<int64_t>(total, 0)));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total; i += num_replicas) mine.push_back(indices[static_cast<std::size_t>(i)]);
  return mine;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, TaskKind task, int64_t batch_size, bool shuffle,
                       int64_t seed, bool drop_last, int64_t num_replicas, int64_t rank)
    : dataset_(std::move(dataset)), task_(task), batch_size_(batch_size), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last), num_replicas_(num_replicas), rank_(rank) {}

int64_t DataLoader::examples_per_replica() const {
  const int64_t n = dataset_->size();
  return num_replicas_ == 1 ? n : (n + num_replicas_ - 1) / num_replicas_;
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = examples_per_replica();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  order_ = epoch_order(dataset_->size(), shuffle_, seed_, epoch);
  if (num_replicas_ > 1) order_ = distributed_shard(order_, num_replicas_, rank_, /*drop_last=*/false);
  position_ = std::min<int64_t>(skip_batches * batch_size_, static_cast<int64_t>(order_.size()));
}

std::vector<Example> DataLoader::next_examples() {
  const auto n = static_cast<int64_t>(order_.size());
  const int64_t end = std::min(n, position_ + batch_size_);
  if (position_ >= n || (drop_last_ && end - position_ < batch_size_)) return {};
  std::vector<Example> examples;
  for (int64_t i = position_; i < end; ++i) examples.push_back(dataset_->get(order_[static_cast<std::size_t>(i)]));
  position_ = end;
  return examples;
}

bool DataLoader::next(Batch& batch) {
  auto examples = next_examples();
  if (examples.empty()) return false;
  batch = collate(examples, task_);
  return true;
}

}  // namespace hftrain
