// HF example scripts' max_train_samples / max_eval_samples / max_predict_samples: a data source whose
// splits keep only their first N examples (HF: dataset.select(range(min(len(dataset), N)))), after
// tokenization and packing, in the source's order. Everything else is the wrapped source's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "data/dataset.h"

namespace hftrain {

struct SplitSampleLimits {
  std::optional<int64_t> train, eval, test;  // null = every example
  bool any() const { return train || eval || test; }
};

// The first `limit` examples of `dataset` (all of them when it has fewer).
std::shared_ptr<const Dataset> first_examples(std::shared_ptr<const Dataset> dataset, int64_t limit);

class SampleLimitedSource : public DataSource {
 public:
  SampleLimitedSource(std::unique_ptr<DataSource> source, SplitSampleLimits limits)
      : source_(std::move(source)), limits_(limits) {}
  std::shared_ptr<const Dataset> split(const std::string& name) const override;
  TaskKind task() const override { return source_->task(); }
  DataShape shape() const override { return source_->shape(); }
  std::vector<std::string> default_metrics() const override { return source_->default_metrics(); }
  const Tokenizer* tokenizer() const override { return source_->tokenizer(); }
  const ChatTemplate* chat_template() const override { return source_->chat_template(); }
  TokenizerChanges tokenizer_changes() const override { return source_->tokenizer_changes(); }

 private:
  std::unique_ptr<DataSource> source_;
  SplitSampleLimits limits_;
};

}  // namespace hftrain
