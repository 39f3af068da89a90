#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a trained model: install dependencies, build
# (Release) and run the built-in example, then evaluate and predict with the trained model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/hftrain train configs/quickstart.yaml
./build/hftrain predict runs/quickstart
