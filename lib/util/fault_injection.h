// Test-only fault injection for checkpoint saving, driven by the HFTRAIN_FAULT_INJECT environment
// variable (a comma-separated list; unset = no effect, one getenv per process):
//   save:<k>          SIGKILL this process at the k-th write step (counted over every save of the run)
//   enospc:<k>        the k-th write step fails as if the disk were full (ENOSPC)
//   eacces:<k>        the k-th write step fails as if output_dir were not writable (EACCES)
//   trace             print each write step to stderr: "fault-inject: write step <n>: <what>"
//   step_delay_ms:<m> sleep m milliseconds after every optimizer step (lets a test signal a run mid-way)
//   generate_delay_ms:<m> sleep m milliseconds inside every generation batch of predict (lets a test know
//                     a lower bound of the time spent generating without timing anything itself)
//   skip_rng_restore  resume does not restore the RNG streams (a negative control for exactness tests)
//   overflow:<k>      mixed precision: rank 0's gradients hold an inf at the k-th optimizer step this
//                     process takes (1-based; may be given several times), so the step must be skipped
//   aio_eio:<k>       the k-th asynchronous I/O request of this process (offload swap files) completes
//                     with EIO; aio_enospc:<k> with ENOSPC
//   swap_free_bytes:<n> the offload swap directory's filesystem reports n bytes free (a full disk)
// A "write step" is one durable action of a save: writing part of a file, an fsync, a rename, a delete.
#pragma once

#include <string>

namespace hftrain {
namespace fault {

// Called before each write step. Returns 0, or the errno the step must fail with (ENOSPC / EACCES); may
// never return (SIGKILL). `what` names the step for the trace.
int write_step(const std::string& what);

// Called by the trainer after each optimizer step (the step_delay_ms hook).
void after_optimizer_step();

// Called by predict inside each timed generation batch (the generate_delay_ms hook).
void inside_generation_batch();

// True when "skip_rng_restore" is set.
bool skip_rng_restore();

// Called once per asynchronous I/O request (offload/aio_file.h): 0, or the errno it must complete with.
int aio_request();

// The free bytes swap_free_bytes:<n> makes the swap directory's filesystem report, or -1 (unset).
long long swap_free_bytes();

// Called once per mixed-precision optimizer step: true when overflow:<k> names this step.
bool forced_overflow();

}  // namespace fault
}  // namespace hftrain
