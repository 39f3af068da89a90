// Internal to the kernel layer: the table of update functions one instruction set provides (each over a whole
// stream, single-threaded), and the per-ISA constructors. A constructor returns nullptr when its ISA is not
// compiled into this build (e.g. AVX-512 on ARM).
#pragma once

#include "optim/kernels/update_kernels.h"

namespace hftrain {
namespace optim_kernels {

struct KernelTable {
  const char* name;
  void (*adam)(const Stream&, float*, float*, const AdamCoef&);
  void (*sgd)(const Stream&, float*, const SgdCoef&);
  void (*lion)(const Stream&, float*, const LionCoef&);
  void (*adagrad)(const Stream&, float*, const AdagradCoef&);
};

const KernelTable* scalar_table();
const KernelTable* avx2_table();
const KernelTable* avx512_table();
const KernelTable* neon_table();
// The CUDA updates over a whole stream on the current device's current stream (optim/kernels/cuda_table.cpp), or
// nullptr on a build without them.
const KernelTable* cuda_table();

}  // namespace optim_kernels
}  // namespace hftrain
