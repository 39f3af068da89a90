#!/usr/bin/env bash
# Compiles each CUDA source of lib/ (kernels/cuda/, optim/kernels/cuda/) with nvcc (device code for the GPUs a CUDA build targets, warnings
# as errors), so that a machine without a GPU -- CI included -- finds a kernel that no longer compiles. nvcc needs no
# LibTorch for these files (kernels/cuda/launch.h). Where no nvcc is installed it says so and exits 77, which ctest
# counts as skipped. NVCC names another compiler; HFTRAIN_CUDA_ARCHITECTURES another architecture (default 90).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/find_nvcc.sh"
nvcc="$(find_nvcc)"
if [ -z "$nvcc" ]; then
  echo "HFTRAIN_TEST_SKIPPED: no nvcc on this machine, so the CUDA sources of lib/ were not compiled"
  exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
arch="${HFTRAIN_CUDA_ARCHITECTURES:-90}"
echo "$("$nvcc" --version | tail -1), sm_$arch"
for src in "$root"/lib/kernels/cuda/*.cu "$root"/lib/optim/kernels/cuda/*.cu; do
  "$nvcc" -std=c++17 -O3 -arch="sm_$arch" -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
    -I "$root/lib" -c "$src" -o "$out/$(basename "$src").o"
  echo "compiled ${src#"$root"/}"
done
