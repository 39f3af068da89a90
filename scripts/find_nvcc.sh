# Sourced by the scripts that need CUDA's compiler: find_nvcc prints its path -- $NVCC when set, else nvcc on PATH,
# else CUDA's usual folder (/usr/local/cuda/bin) -- or nothing where none is installed.
find_nvcc() {
  local candidate
  for candidate in "${NVCC:-}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
}
