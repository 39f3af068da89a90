#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a full test run: install dependencies, build with
# tests and run every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh --tests
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc)"
