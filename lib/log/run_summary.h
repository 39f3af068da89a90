// The block printed when a run starts: what the spec resolved to and the quantities derived from it
// (HF's "***** Running training *****" block, plus world size, steps per epoch, warmup, device).
#pragma once

#include <cstdint>
#include <string>

#include "log/speed_metrics.h"

namespace hftrain {

struct TrainingSummary {
  int64_t num_examples = 0;
  int64_t num_epochs = 0;
  int64_t world_size = 1;
  int64_t per_device_batch_size = 0;
  int64_t gradient_accumulation_steps = 1;
  int64_t global_batch_size = 0;
  int64_t batches_per_epoch = 0;
  int64_t steps_per_epoch = 0;
  int64_t max_steps = 0;
  int64_t warmup_steps = 0;
  ParameterCounts parameters;
  std::string compute;  // describe_compute()
};

// "cpu, 2 intra-op threads (BLAS: openblas-openmp)" for this process as configured now; the device part is
// what set_compute_device() recorded ("cpu" until then).
std::string describe_compute();
// The device text of the run-start blocks: this rank's device, or every rank's (dist/devices.h
// describe_rank_devices), e.g. "rank 0: cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB); rank 1: cuda:1 (...)".
void set_compute_device(const std::string& description);
// 1234567 -> "1,234,567" (Python's "{:,}").
std::string thousands(int64_t v);

std::string format_training_summary(const TrainingSummary& s);
// "***** Running Evaluation *****" (or Prediction) with examples, batch size and compute.
std::string format_inference_summary(const std::string& title, int64_t num_examples, int64_t batch_size,
                                     const std::string& compute);

}  // namespace hftrain
