#!/usr/bin/env bash
# Compiles (syntax only) the C++ of lib/ and tests/unit/ that only a CUDA build compiles -- the code behind
# HFTRAIN_WITH_CUDA (NCCL, device probing, activation-offload streams, the [gpu] tests) and the CUDA kernels'
# wrappers (HFTRAIN_WITH_CUDA_KERNELS) -- against this machine's LibTorch headers and the CUDA toolkit's, so that a
# machine without a GPU -- CI included -- finds such code that no longer compiles before a GPU session does.
# Arguments: the C++ compiler, then LibTorch's include directories (CMake's TORCH_INCLUDE_DIRS). Where the CUDA
# runtime headers or LibTorch's c10/cuda headers are missing it says so and exits 77 (ctest: skipped). A CPU
# LibTorch lacks the generated c10/cuda/impl/cuda_cmake_macros.h: an empty stand-in is used, after every real
# include directory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cxx="$1"; shift
torch_includes=("$@")
source "$root/scripts/find_nvcc.sh"
nvcc="$(find_nvcc)"
cuda_include=""
if [ -n "$nvcc" ] && [ -f "$(dirname "$nvcc")/../include/cuda_runtime_api.h" ]; then
  cuda_include="$(cd "$(dirname "$nvcc")/../include" && pwd)"
fi
c10_cuda=""
for dir in "${torch_includes[@]}"; do [ -f "$dir/c10/cuda/CUDAStream.h" ] && c10_cuda="$dir"; done
if [ -z "$cuda_include" ] || [ -z "$c10_cuda" ]; then
  echo "HFTRAIN_TEST_SKIPPED: no CUDA toolkit headers (${cuda_include:-none}) or LibTorch c10/cuda headers" \
       "(${c10_cuda:-none}) here, so the CUDA code paths were not compiled"
  exit 77
fi
stand_in="$(mktemp -d)"
trap 'rm -rf "$stand_in"' EXIT
mkdir -p "$stand_in/c10/cuda/impl"
echo "#pragma once" > "$stand_in/c10/cuda/impl/cuda_cmake_macros.h"
flags=(-std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -DHFTRAIN_WITH_CUDA=1 -DHFTRAIN_WITH_CUDA_KERNELS=1
       -I "$root/lib" -I "$root/tests/unit")
for dir in "${torch_includes[@]}"; do  # the compiler's own directories stay where it searches them
  case "$dir" in /usr/include | /usr/local/include) ;; *) flags+=(-isystem "$dir") ;; esac
done
flags+=(-isystem "$cuda_include" -isystem "$stand_in")
compiles() {  # compiles HEADER...: whether a file of just those includes compiles with the flags
  printf '#include <%s>\n' "$@" > "$stand_in/probe.cpp"
  "$cxx" "${flags[@]}" "$stand_in/probe.cpp" > "$stand_in/probe.log" 2>&1
}
# LibTorch's CUDA context header pulls in the CUDA math libraries' headers (cuBLAS, cuSPARSE, cuSOLVER), which a
# minimal toolkit lacks.
if ! compiles ATen/cuda/CUDAContext.h c10/cuda/CUDAStream.h; then
  echo "HFTRAIN_TEST_SKIPPED: LibTorch's CUDA headers do not compile with the CUDA headers here" \
       "($(grep -m1 -o "fatal error: .*" "$stand_in/probe.log" || echo "see the compiler"))"
  exit 77
fi
nccl=0
compiles nccl.h && nccl=1 && flags+=(-DUSE_C10D_NCCL)  # ProcessGroupNCCL's declarations need it
echo "LibTorch headers from $c10_cuda, CUDA headers from $cuda_include, NCCL headers: $([ $nccl = 1 ] && echo yes || echo no)"
failed=0
while read -r src; do
  if [ $nccl = 0 ] && grep -q "ProcessGroupNCCL" "$src"; then echo "skipped ${src#"$root"/} (no nccl.h here)"; continue; fi
  if "$cxx" "${flags[@]}" "$src"; then echo "compiled ${src#"$root"/}"
  else echo "FAILED ${src#"$root"/}"; failed=1; fi
done < <(grep -rlE "HFTRAIN_WITH_CUDA(_KERNELS)?\b" "$root/lib" "$root/tests/unit" --include=*.cpp | sort)
exit $failed
