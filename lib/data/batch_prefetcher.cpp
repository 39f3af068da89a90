// Background batch preparation (see batch_prefetcher.h).
#include "data/batch_prefetcher.h"

namespace hftrain {

BatchPrefetcher::BatchPrefetcher(DataLoader& loader, int depth) : loader_(loader), depth_(depth) {}

BatchPrefetcher::~BatchPrefetcher() { stop_worker(); }

void BatchPrefetcher::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
  ready_.clear();
  stop_ = false;
  epoch_done_ = false;
  error_ = nullptr;
}

void BatchPrefetcher::start_epoch(int64_t epoch, int64_t skip_batches) {
  stop_worker();
  loader_.start_epoch(epoch, skip_batches);
  if (depth_ > 0) worker_ = std::thread([this] { work(); });
}

void BatchPrefetcher::work() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stop_ || static_cast<int>(ready_.size()) < depth_; });
        if (stop_) return;
      }
      Batch batch;
      const bool more = loader_.next(batch);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (more) ready_.push_back(std::move(batch));
        else epoch_done_ = true;
      }
      changed_.notify_all();
      if (!more) return;
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      epoch_done_ = true;
    }
    changed_.notify_all();
  }
}

bool BatchPrefetcher::next(Batch& batch) {
  if (depth_ == 0) return loader_.next(batch);
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || epoch_done_; });
  if (!ready_.empty()) {
    batch = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

}  // namespace hftrain
