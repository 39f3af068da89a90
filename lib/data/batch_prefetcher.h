// Background batch preparation: while the model runs a step, one thread fills the next batches from a
// DataLoader (sampling, example generation or lookup, collation, MLM masking), up to `depth` batches
// ahead (more when steps are under 1 ms: see target_depth), and runs on into the next epoch, so the
// training step does not wait on data (the train_data_wait_fraction metric shows it). Batches come out
// in exactly the order and with exactly the values the loader gives synchronously: the loader is only
// touched by the worker while it runs, and its per-batch randomness (MLM masking) is seeded by
// (seed, epoch, batch index), not by the calling thread. A `stage` given at construction is run on each
// batch by whoever makes it (the worker, or next() without one): the trainer pins a batch bound for a GPU
// there, off the step's path, as PyTorch's DataLoader does in its pin_memory thread.
//
// Hand-over cost: taking a batch never wakes the worker. Waking a sleeping thread costs the waker a
// futex syscall and, on a VM, an inter-processor interrupt: measured 12-15 us per notify on the 2-core
// benchmark machine (perf: futex_wake -> try_to_wake_up), 3-7 % of the overhead-bound mlp step. Instead
// the worker, when the queue is full, sleeps a quarter of the measured interval between batches and
// looks again; only a consumer that finds the queue empty (it has to wait anyway) wakes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "data/loader.h"

namespace hftrain {

// What is done to each batch as it is made (data/batch_placement.h pin_stage); an error in it is the batch's.
using BatchStage = std::function<void(Batch&)>;

class BatchPrefetcher {
 public:
  // depth 0: no thread; next() calls the loader directly. num_epochs: the worker runs on into epoch
  // e + 1 after epoch e only while e + 1 < num_epochs.
  BatchPrefetcher(DataLoader& loader, int depth, int64_t num_epochs, BatchStage stage = nullptr);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // DataLoader::start_epoch, then the worker fills this epoch's batches. When the previous epoch was
  // read to its end and skip_samples is 0, the worker has already started this epoch and carries on.
  void start_epoch(int64_t epoch, int64_t skip_samples = 0);
  // The next batch of the epoch; false at its end. An error of the worker is rethrown here.
  bool next(Batch& batch);

 private:
  struct Item {
    Batch batch;
    bool end_of_epoch = false;  // marks the end of one epoch's batches; no batch
  };
  void stop_worker();
  void work(int64_t epoch);
  std::chrono::nanoseconds poll_interval() const;  // under mutex_
  int target_depth() const;                        // under mutex_

  static constexpr int kMaxDepth = 32;  // the most batches queued however short the steps
  DataLoader& loader_;
  const int depth_;
  const int64_t num_epochs_;
  const BatchStage stage_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable space_;  // the worker waits (timed) for room in the queue
  std::condition_variable filled_;  // the consumer waits for a batch
  std::deque<Item> ready_;
  int queued_batches_ = 0;       // batches (not end marks) in ready_
  bool worker_done_ = false;     // the worker queued its last item (or failed)
  bool stop_ = false;
  std::exception_ptr error_;
  int64_t epoch_ = -1;           // the epoch next() reads
  bool epoch_read_to_end_ = false;
  std::chrono::steady_clock::time_point last_take_{};
  double take_interval_ns_ = 0;  // moving average of the time between two next() calls
};

}  // namespace hftrain
