// Split sample limits (see sample_limits.h).
#include "data/sample_limits.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {
namespace {

class HeadDataset : public Dataset {
 public:
  HeadDataset(std::shared_ptr<const Dataset> inner, int64_t size) : inner_(std::move(inner)), size_(size) {}
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override {
    if (index < 0 || index >= size_) throw RuntimeFailure("dataset index " + std::to_string(index) + " out of range");
    return inner_->get(index);
  }
  CollateOptions collate_options() const override { return inner_->collate_options(); }
  std::vector<int64_t> lengths(const std::string& column) const override {
    std::vector<int64_t> all = inner_->lengths(column);
    all.resize(static_cast<std::size_t>(std::min<int64_t>(size_, static_cast<int64_t>(all.size()))));
    return all;
  }

 private:
  std::shared_ptr<const Dataset> inner_;
  int64_t size_;
};

}  // namespace

std::shared_ptr<const Dataset> first_examples(std::shared_ptr<const Dataset> dataset, int64_t limit) {
  if (!dataset || dataset->size() <= limit) return dataset;
  return std::make_shared<HeadDataset>(std::move(dataset), std::max<int64_t>(0, limit));
}

std::shared_ptr<const Dataset> SampleLimitedSource::split(const std::string& name) const {
  const std::optional<int64_t>& limit = name == "train" ? limits_.train : name == "eval" ? limits_.eval : limits_.test;
  auto dataset = source_->split(name);
  return limit ? first_examples(std::move(dataset), *limit) : dataset;
}

}  // namespace hftrain
