// Collation and sampling (see loader.h).
#include "data/loader.h"

#include <algorithm>

#include "data/packing.h"
#include "data/sequence_slices.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace hftrain {

std::vector<int64_t> Dataset::lengths(const std::string& /*column*/) const {
  std::vector<int64_t> out(static_cast<std::size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) {
    Example e = get(i);
    out[static_cast<std::size_t>(i)] = static_cast<int64_t>(e.input_ids.empty() ? e.features.size() : e.input_ids.size());
  }
  return out;
}

Batch collate(const std::vector<Example>& examples, TaskKind task, const CollateOptions& options, uint64_t mlm_seed) {
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
  torch::Tensor special;
  if (!examples[0].input_ids.empty()) {
    int64_t T = options.pad_to_length;
    bool has_types = false;
    for (const auto& e : examples) {
      T = std::max<int64_t>(T, static_cast<int64_t>(e.input_ids.size()));
      has_types = has_types || !e.token_type_ids.empty();
    }
    b.input_ids = torch::full({B, T}, options.pad_id, torch::kLong);
    b.attention_mask = torch::zeros({B, T}, torch::kLong);
    auto ids = b.input_ids.accessor<int64_t, 2>();
    auto mask = b.attention_mask.accessor<int64_t, 2>();
    for (int64_t i = 0; i < B; ++i)
      for (std::size_t t = 0; t < examples[i].input_ids.size(); ++t) {
        ids[i][static_cast<int64_t>(t)] = examples[i].input_ids[t];
        mask[i][static_cast<int64_t>(t)] = 1;
      }
    if (has_types) {
      b.token_type_ids = torch::zeros({B, T}, torch::kLong);
      auto tt = b.token_type_ids.accessor<int64_t, 2>();
      for (int64_t i = 0; i < B; ++i)
        for (std::size_t t = 0; t < examples[i].token_type_ids.size(); ++t)
          tt[i][static_cast<int64_t>(t)] = examples[i].token_type_ids[t];
    }
    if (task == TaskKind::kCausalLm) {
      b.labels = torch::full({B, T}, -100, torch::kLong);
      auto lab = b.labels.accessor<int64_t, 2>();
      for (int64_t i = 0; i < B; ++i)
        for (std::size_t t = 0; t < examples[i].labels.size() && t < examples[i].input_ids.size(); ++t)
          lab[i][static_cast<int64_t>(t)] = examples[i].labels[t];
    }
    if (task == TaskKind::kSeq2Seq) {
      int64_t L = options.label_pad_to_length;
      for (const auto& e : examples) L = std::max<int64_t>(L, static_cast<int64_t>(e.labels.size()));
      b.labels = torch::full({B, L}, -100, torch::kLong);
      auto lab = b.labels.accessor<int64_t, 2>();
      for (int64_t i = 0; i < B; ++i)
        for (std::size_t t = 0; t < examples[i].labels.size(); ++t) lab[i][static_cast<int64_t>(t)] = examples[i].labels[t];
    }
    if (task == TaskKind::kMaskedLm) {
      special = torch::zeros({B, T}, torch::kLong);
      auto sp = special.accessor<int64_t, 2>();
      for (int64_t i = 0; i < B; ++i)
        for (std::size_t t = 0; t < examples[i].special_tokens_mask.size(); ++t)
          sp[i][static_cast<int64_t>(t)] = examples[i].special_tokens_mask[t];
    }
  }
  if (task == TaskKind::kClassification) {
    b.labels = torch::empty({B}, torch::kLong);
    auto lab = b.labels.accessor<int64_t, 1>();  // not labels[i] = ...: a tensor op per element costs ~1 us
    for (int64_t i = 0; i < B; ++i) lab[i] = examples[i].label;
  }
  if (task == TaskKind::kMaskedLm && b.input_ids.defined()) mask_tokens(b, special, options, mlm_seed);
  return b;
}

void mask_tokens(Batch& batch, const torch::Tensor& special_mask, const CollateOptions& options, uint64_t seed) {
  if (options.mask_id < 0 || options.vocab_size <= 0)
    throw RuntimeFailure("masked_lm collation needs a mask token id and a vocabulary size");
  auto gen = at::detail::createCPUGenerator(seed);
  torch::Tensor inputs = batch.input_ids;
  torch::Tensor labels = inputs.clone();
  torch::Tensor probability = torch::full(labels.sizes(), options.mlm_probability, torch::kFloat32);
  torch::Tensor never = batch.attention_mask.eq(0);
  if (special_mask.defined()) never = never.logical_or(special_mask.ne(0));
  probability.masked_fill_(never, 0.0);
  torch::Tensor masked = torch::bernoulli(probability, gen).to(torch::kBool);
  labels.masked_fill_(masked.logical_not(), -100);
  torch::Tensor replaced = torch::bernoulli(torch::full(labels.sizes(), 0.8, torch::kFloat32), gen).to(torch::kBool) & masked;
  inputs.masked_fill_(replaced, options.mask_id);
  torch::Tensor random = torch::bernoulli(torch::full(labels.sizes(), 0.5, torch::kFloat32), gen).to(torch::kBool) &
                         masked & replaced.logical_not();
  torch::Tensor words = torch::randint(options.vocab_size, labels.sizes(), gen, torch::TensorOptions().dtype(torch::kLong));
  batch.input_ids = torch::where(random, words, inputs);
  batch.labels = labels;
}

uint64_t batch_mask_seed(int64_t seed, int64_t epoch, int64_t batch_index) {
  // SplitMix64 finaliser over the three numbers: distinct, well-spread seeds per batch.
  uint64_t z = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(epoch) * 0xBF58476D1CE4E5B9ull ^
               static_cast<uint64_t>(batch_index) * 0x94D049BB133111EBull;
  return splitmix64_finalize(z) & 0x7FFFFFFFFFFFFFFFull;
}

std::vector<int64_t> length_grouped_indices(const std::vector<int64_t>& lengths, int64_t batch_size,
                                            const std::vector<int64_t>& perm) {
  const auto n = static_cast<int64_t>(perm.size());
  if (n == 0) return {};
  int64_t mult = std::min<int64_t>(n / (batch_size * 4), 50);
  if (mult == 0) mult = 1;
  const int64_t megabatch = mult * batch_size;
  auto len = [&](int64_t i) { return lengths[static_cast<std::size_t>(i)]; };
  std::vector<int64_t> out(perm);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < n; s += megabatch) {
    starts.push_back(s);
    auto first = out.begin() + s, last = out.begin() + std::min(n, s + megabatch);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return len(a) > len(b); });
  }
  std::size_t best = 0;  // first megabatch with the greatest maximum (torch.argmax: first of equals)
  for (std::size_t m = 1; m < starts.size(); ++m)
    if (len(out[static_cast<std::size_t>(starts[m])]) > len(out[static_cast<std::size_t>(starts[best])])) best = m;
  std::swap(out[0], out[static_cast<std::size_t>(starts[best])]);
  return out;
}

std::vector<int64_t> sortish_indices(const std::vector<int64_t>& lengths, int64_t batch_size,
                                     const std::vector<int64_t>& perm, uint64_t seed) {
  const auto n = static_cast<int64_t>(perm.size());
  if (n == 0) return {};
  auto len = [&](int64_t i) { return lengths[static_cast<std::size_t>(i)]; };
  std::vector<int64_t> sorted(perm);
  const int64_t chunk = 50 * batch_size;
  for (int64_t s = 0; s < n; s += chunk)
    std::stable_sort(sorted.begin() + s, sorted.begin() + std::min(n, s + chunk), [&](int64_t a, int64_t b) { return len(a) > len(b); });
  const int64_t batches = (n + batch_size - 1) / batch_size;
  int64_t longest = 0;  // the batch whose first example is longest (argmax: the first of equals)
  for (int64_t b = 1; b < batches; ++b)
    if (len(sorted[static_cast<std::size_t>(b * batch_size)]) > len(sorted[static_cast<std::size_t>(longest * batch_size)])) longest = b;
  std::vector<int64_t> batch_order{longest};  // the longest batch, then the others (first batch in its place) shuffled
  std::vector<int64_t> rest;
  for (int64_t b = 1; b < batches; ++b) rest.push_back(b == longest ? 0 : b);
  auto gen = at::detail::createCPUGenerator(seed);
  auto shuffle = torch::randperm(static_cast<int64_t>(rest.size()), gen, torch::TensorOptions().dtype(torch::kLong));
  for (int64_t i = 0; i < shuffle.numel(); ++i) batch_order.push_back(rest[static_cast<std::size_t>(shuffle.data_ptr<int64_t>()[i])]);
  std::vector<int64_t> out;
  out.reserve(perm.size());
  for (int64_t b : batch_order)
    for (int64_t i = b * batch_size; i < std::min(n, (b + 1) * batch_size); ++i) out.push_back(sorted[static_cast<std::size_t>(i)]);
  return out;
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
                                       bool drop_last, int64_t skip) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw RuntimeFailure("distributed sampler: rank " + std::to_string(rank) + " is not in [0, " +
                         std::to_string(num_replicas) + ")");
  const auto all = static_cast<int64_t>(order.size());
  skip = std::clamp<int64_t>(skip, 0, all);
  const int64_t n = all - skip;
  // torch DistributedSampler.__init__ / __iter__ (torch 1.13), over the part of the order not yet consumed.
  const int64_t num_samples = drop_last && n % num_replicas != 0 ? (n - num_replicas + num_replicas - 1) / num_replicas
                                                                 : (n + num_replicas - 1) / num_replicas;
  const int64_t total = num_samples * num_replicas;
  std::vector<int64_t> indices(order.begin() + skip, order.end());
  if (!drop_last) {
    for (int64_t i = 0; n > 0 && static_cast<int64_t>(indices.size()) < total; ++i)
      indices.push_back(order[static_cast<std::size_t>(i % all)]);
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
      drop_last_(drop_last), num_replicas_(num_replicas), rank_(rank),
      collate_options_(dataset_->collate_options()) {}

void DataLoader::read_lengths(const std::string& what, int64_t group_batch_size, const std::string& length_column_name) {
  if (group_batch_size < 1) throw RuntimeFailure(what + ": batch size must be >= 1");
  lengths_ = dataset_->lengths(length_column_name);
  if (static_cast<int64_t>(lengths_.size()) != dataset_->size())
    throw RuntimeFailure(what + ": column '" + length_column_name + "' has " + std::to_string(lengths_.size()) +
                         " values for " + std::to_string(dataset_->size()) + " examples");
  group_batch_size_ = group_batch_size;
}

void DataLoader::group_by_length(int64_t group_batch_size, const std::string& length_column_name) {
  read_lengths("group_by_length", group_batch_size, length_column_name);
  length_order_ = LengthOrder::kGroupByLength;
}

void DataLoader::sortish(int64_t batch_size, const std::string& length_column_name) {
  read_lengths("sortish_sampler", batch_size, length_column_name);
  length_order_ = LengthOrder::kSortish;
}

int64_t DataLoader::examples_per_replica() const {
  const int64_t n = dataset_->size();
  return num_replicas_ == 1 ? n : (n + num_replicas_ - 1) / num_replicas_;
}

int64_t DataLoader::batches_per_epoch() const { return batches_after(0); }

int64_t DataLoader::examples_after(int64_t skip_samples) const {
  const int64_t n = std::max<int64_t>(0, dataset_->size() - std::max<int64_t>(0, skip_samples));
  return (n + num_replicas_ - 1) / num_replicas_;
}

int64_t DataLoader::batches_after(int64_t skip_samples) const {
  const int64_t n = examples_after(skip_samples);
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

int64_t DataLoader::samples_consumed_after(int64_t skip_samples, int64_t batches) const {
  const int64_t skip = std::clamp<int64_t>(skip_samples, 0, dataset_->size());
  return skip + std::min(batches * batch_size_, examples_after(skip)) * num_replicas_;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_samples) {
  epoch_ = epoch;
  order_ = epoch_order(dataset_->size(), shuffle_, seed_, epoch);
  if (length_order_ == LengthOrder::kGroupByLength) order_ = length_grouped_indices(lengths_, group_batch_size_, order_);
  if (length_order_ == LengthOrder::kSortish)
    order_ = sortish_indices(lengths_, group_batch_size_, order_, batch_mask_seed(seed_, epoch, -1));
  const int64_t skip = std::clamp<int64_t>(skip_samples, 0, static_cast<int64_t>(order_.size()));
  if (num_replicas_ > 1) order_ = distributed_shard(order_, num_replicas_, rank_, /*drop_last=*/false, skip);
  else order_.erase(order_.begin(), order_.begin() + skip);
  batch_offset_ = skip / samples_per_batch();
  position_ = 0;
}

void DataLoader::slice_sequences(int64_t parts, int64_t index) {
  if (parts > 1 && task_ != TaskKind::kCausalLm)
    throw ConfigError("distributed.sequence_parallel_size: " + std::to_string(parts) +
                      " slices causal-LM sequences; this data is another task (classification, masked LM or "
                      "sequence-to-sequence)");
  sequence_parts_ = parts;
  sequence_index_ = index;
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

bool DataLoader::next(Batch& batch, std::vector<Example>* examples_out) {
  const int64_t batch_index = batch_offset_ + position_ / batch_size_;
  auto examples = next_examples();
  if (examples.empty()) return false;
  // Packed rows of several examples (data.packing: bfd) attend within each: the padding-free path, as TRL's bfd.
  const bool packed = std::any_of(examples.begin(), examples.end(), [](const Example& e) { return !e.segment_lengths.empty(); });
  batch = flatten_ || packed ? flatten_for_task(examples, task_)
                   : collate(examples, task_, collate_options_, batch_mask_seed(seed_, epoch_, batch_index));
  if (sequence_parts_ > 1) batch = hftrain::slice_sequences(batch, sequence_parts_, sequence_index_, collate_options_.pad_id);
  if (examples_out) *examples_out = std::move(examples);
  return true;
}

}  // namespace hftrain
