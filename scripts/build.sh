#!/usr/bin/env bash
# Configures and builds hftrain (Release) into ./build. Usage: scripts/build.sh [--tests]
set -euo pipefail
cd "$(dirname "$0")/.."
# Let ccache (when installed) cache the translation units that use the precompiled LibTorch header.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
tests=OFF
bench=ON
# The test build (CI's) leaves out the micro-benchmarks (bench/): no test runs them, and they cost CI minutes.
[ "${1:-}" = "--tests" ] && tests=ON && bench=OFF
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DHFTRAIN_BUILD_TESTS=$tests -DHFTRAIN_BUILD_BENCH=$bench
# Each LibTorch translation unit needs ~1 GB of RAM to compile: one job per core is safe on CI's 2 cores / 24 GB.
cmake --build build --parallel "$(nproc)"
