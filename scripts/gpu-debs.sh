#!/usr/bin/env bash
# Downloads (no install) Debian 12's .deb files of the libraries hftrain builds against, for a GPU machine
# that has PyTorch but no apt (scripts/gpu-check.sh unpacks them from HFTRAIN_DEPS_DEBS). Run on Debian 12:
#   scripts/gpu-debs.sh DIR
set -euo pipefail
dir=${1:?usage: scripts/gpu-debs.sh DIR}
mkdir -p "$dir"
cd "$dir"
# The -dev packages of scripts/install-deps.sh that a PyTorch wheel does not bring, their runtime libraries,
# pkg-config, Catch2 (the tests), gloo's headers (LibTorch 2.x wheels ship none), oneDNN (the CPU linear layers'
# sgemm, kernels/gemm.h) and the columnar files' codecs (snappy, zstd, zlib: lib/columnar, since 2026-12; configure
# stops without them).
apt-get download libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 \
  nlohmann-json3-dev libxxhash-dev libxxhash0 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
  libutf8proc-dev libutf8proc2 libsentencepiece-dev libsentencepiece0 libprotobuf-lite32 libaio-dev libaio1 \
  libgloo-dev catch2 pkgconf pkgconf-bin libpkgconf3 pkg-config libdnnl-dev libdnnl2 \
  libsnappy-dev libsnappy1v5 libzstd-dev libzstd1 zlib1g-dev zlib1g
ls
