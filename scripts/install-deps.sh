#!/usr/bin/env bash
# Installs every build, test and runtime dependency of hftrain from Debian 12's apt archive.
# Idempotent: packages already present are left alone. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libgloo-dev           # LibTorch 1.13 (CPU) and the gloo headers c10d includes
  libdnnl-dev                        # oneDNN's sgemm for the linear layers (LibTorch already loads libdnnl)
  libopenblas0-openmp                # optimised BLAS sharing LibTorch's OpenMP pool; see README "Threads and BLAS"
  libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libxxhash-dev
  libsentencepiece-dev libpcre2-dev libutf8proc-dev  # tokenizers: sentencepiece models, Unicode regex, NFD / categories
  libaio-dev                         # Linux AIO for NVMe offload's swap files
  catch2                             # Catch2 v2 (tests)
  fio                                # raw disk bandwidth, the yardstick of the offload benchmark
  python3 python3-torch python3-numpy  # independent reference implementation used by tests
  python3-nltk                       # NLTK's Porter stemmer: the reference for ROUGE's use_stemmer
  chromium                           # headless browser that renders `hftrain report` pages in the tests
  python3-sentencepiece              # trains the sentencepiece model behind the tokenizer.json test fixtures
  python3-optuna                     # Optuna 3.1 (TPE / random / CMA-ES, pruners, RDB storage): `hftrain search` drives it
  python3-jinja2                     # Jinja2 3.1: the reference renderer of chat templates
  libsnappy-dev libzstd-dev zlib1g-dev  # parquet's codecs (snappy, zstd, gzip)
  zstd                               # the zstd command: the codec of the zstd-compressed Arrow test fixtures
)

# Test-only npm packages into $HFTRAIN_NPM_DIR (default /opt/hftrain-npm), pinned: HF tokenizers' native
# binding (tests/reference/hf_tokenizers/expected_ids.js regenerates / checks the expected ids with it), and
# parquet-wasm (the Rust parquet crate) with apache-arrow (Arrow's JavaScript IPC writer), the independent
# writers of the parquet / Arrow fixtures (tests/reference/columnar_fixtures.js). Prebuilt (wasm / native), no
# compiler needed. Node.js and npm come from Debian only when the machine has no npm yet (a Node.js from
# elsewhere, e.g. NodeSource's, already bundles npm, and Debian's npm package would conflict with it). The tests
# that need a package are skipped without it, so a failed npm install is a warning, not an error.
npm_packages=(tokenizers@0.23.2 parquet-wasm@0.8.0 apache-arrow@21.2.0)
install_npm_reference() {
  local dir="${HFTRAIN_NPM_DIR:-/opt/hftrain-npm}"
  local missing_npm=()
  for p in "${npm_packages[@]}"; do
    [ -d "$dir/node_modules/${p%@*}" ] || missing_npm+=("$p")
  done
  if [ ${#missing_npm[@]} -eq 0 ]; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    $SUDO apt-get install -y -qq --no-install-recommends nodejs npm || true
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: warning: no npm; the tests that need ${missing_npm[*]} will be skipped"
    return 0
  fi
  $SUDO mkdir -p "$dir"
  if $SUDO npm install --prefix "$dir" --no-audit --no-fund "${missing_npm[@]}" >/dev/null; then
    echo "install-deps: npm ${missing_npm[*]} in $dir/node_modules"
  else
    echo "install-deps: warning: npm install ${missing_npm[*]} failed; the tests that need them will be skipped"
  fi
}

# Makes the OpenMP build of OpenBLAS the system libblas.so.3 / liblapack.so.3 / libopenblas.so.0 (LibTorch loads all three).
select_openblas_openmp() {
  local arch_dir=/usr/lib/x86_64-linux-gnu
  [ -d "$arch_dir" ] || arch_dir=/usr/lib/$(gcc -print-multiarch 2>/dev/null)
  local multiarch; multiarch=$(basename "$arch_dir")
  for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
    local target="$arch_dir/openblas-openmp/$lib"
    if [ -e "$target" ] && [ "$(readlink -f "$arch_dir/$lib")" != "$(readlink -f "$target")" ]; then
      $SUDO update-alternatives --set "$lib-$multiarch" "$target"
    fi
  done
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  select_openblas_openmp
  install_npm_reference
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
select_openblas_openmp
install_npm_reference
