// Background batch preparation (see batch_prefetcher.h).
#include "data/batch_prefetcher.h"

#include <algorithm>
#include <cmath>

namespace hftrain {

BatchPrefetcher::BatchPrefetcher(DataLoader& loader, int depth, int64_t num_epochs, BatchStage stage)
    : loader_(loader), depth_(depth), num_epochs_(num_epochs), stage_(std::move(stage)) {}

BatchPrefetcher::~BatchPrefetcher() { stop_worker(); }

void BatchPrefetcher::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  if (worker_.joinable()) worker_.join();
  ready_.clear();
  queued_batches_ = 0;
  stop_ = false;
  worker_done_ = false;
  error_ = nullptr;
}

void BatchPrefetcher::start_epoch(int64_t epoch, int64_t skip_samples) {
  const bool carried_on =
      worker_.joinable() && skip_samples == 0 && epoch_read_to_end_ && epoch == epoch_ + 1 && epoch < num_epochs_;
  epoch_ = epoch;
  epoch_read_to_end_ = false;
  if (carried_on) return;  // the worker started this epoch when the previous one ended
  stop_worker();
  loader_.start_epoch(epoch, skip_samples);
  if (depth_ > 0) worker_ = std::thread([this, epoch] { work(epoch); });
}

std::chrono::nanoseconds BatchPrefetcher::poll_interval() const {
  // A quarter of the time between batches: the worker refills long before the queue runs dry (it
  // holds depth - 1 batches when the worker next looks), and wakes only a few times per step.
  const double ns = take_interval_ns_ > 0 ? take_interval_ns_ / 4 : 100e3;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::clamp(ns, 10e3, 20e6)));
}

int BatchPrefetcher::target_depth() const {
  // A sleeping worker's timer can fire late when its (virtual) core is idle: up to ~1 ms was measured
  // on the benchmark machine. Keep at least 2 ms of steps queued so such a late wake-up never stalls a
  // fast step; slow steps keep exactly `depth` (dataloader_prefetch_factor).
  if (take_interval_ns_ <= 0) return depth_;
  const int cover = static_cast<int>(std::ceil(2e6 / take_interval_ns_));
  return std::max(depth_, std::min(cover, kMaxDepth));
}

void BatchPrefetcher::work(int64_t epoch) {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!stop_ && queued_batches_ >= target_depth()) space_.wait_for(lock, poll_interval());
        if (stop_) return;
      }
      Item item;
      const bool end_of_epoch = !loader_.next(item.batch);
      item.end_of_epoch = end_of_epoch;
      if (!end_of_epoch && stage_) stage_(item.batch);
      const bool last = end_of_epoch && epoch + 1 >= num_epochs_;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!end_of_epoch) ++queued_batches_;
        ready_.push_back(std::move(item));
        worker_done_ = last;
      }
      filled_.notify_one();  // no syscall unless the consumer is waiting
      if (last) return;
      if (end_of_epoch) loader_.start_epoch(++epoch, 0);
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      worker_done_ = true;
    }
    filled_.notify_one();
  }
}

bool BatchPrefetcher::next(Batch& batch) {
  if (depth_ == 0) {
    if (!loader_.next(batch)) return false;
    if (stage_) stage_(batch);
    return true;
  }
  if (epoch_read_to_end_) return false;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (last_take_.time_since_epoch().count() != 0) {
    const double ns = std::chrono::duration<double, std::nano>(now - last_take_).count();
    take_interval_ns_ = take_interval_ns_ > 0 ? 0.8 * take_interval_ns_ + 0.2 * ns : ns;
  }
  last_take_ = now;
  if (ready_.empty() && !worker_done_) {
    space_.notify_one();  // late: make sure the worker is not sleeping out its poll interval
    filled_.wait(lock, [this] { return !ready_.empty() || worker_done_; });
  }
  if (ready_.empty()) {  // the worker stopped: an error, or it was never asked for more epochs
    if (error_) std::rethrow_exception(error_);
    epoch_read_to_end_ = true;
    return false;
  }
  Item item = std::move(ready_.front());
  ready_.pop_front();
  if (item.end_of_epoch) {
    epoch_read_to_end_ = true;
    return false;
  }
  --queued_batches_;
  batch = std::move(item.batch);
  return true;
}

}  // namespace hftrain
