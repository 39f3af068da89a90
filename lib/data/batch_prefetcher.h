// Background batch preparation: while the model runs a step, one thread fills the next batches of the
// epoch from a DataLoader (sampling, example generation or lookup, collation, MLM masking), up to
// `depth` batches ahead, so the training step does not wait on data (the train_data_wait_fraction
// metric shows it). Batches come out in exactly the order and with exactly the values the loader gives
// synchronously: the loader is only touched by the worker while an epoch runs, and its per-batch
// randomness (MLM masking) is seeded by (seed, epoch, batch index), not by the calling thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/loader.h"

namespace hftrain {

class BatchPrefetcher {
 public:
  // depth 0: no thread; next() calls the loader directly.
  BatchPrefetcher(DataLoader& loader, int depth);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // DataLoader::start_epoch, then the worker starts filling this epoch's batches.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch; false at its end. An error of the worker is rethrown here.
  bool next(Batch& batch);

 private:
  void stop_worker();
  void work();

  DataLoader& loader_;
  const int depth_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool epoch_done_ = false;  // the worker has queued the epoch's last batch
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace hftrain
