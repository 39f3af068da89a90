#!/usr/bin/env bash
# The first checks on a machine with an NVIDIA GPU (docs/gpu.md): builds hftrain against the CUDA LibTorch of
# the machine's PyTorch, then trains the same specs on the GPU and on the CPU and keeps every log.
#   scripts/gpu-check.sh OUT_DIR [build-dir]
# The build folder is reused when it exists (remove it for a clean build).
# Without apt (e.g. a container that has PyTorch but not hftrain's libraries), put Debian 12's .deb files of
# scripts/install-deps.sh's libraries in a folder (scripts/gpu-debs.sh) and set HFTRAIN_DEPS_DEBS to it: they are unpacked into
# /tmp/hftrain-deps and used from there (nothing is installed into /). HFTRAIN_GPU_TESTS=1 also builds and
# runs the unit tests. HFTRAIN_GPU_TESTS=quick is the short check for a small time budget: the CLI and the
# GPU tests alone (hftrain_gpu_tests: device placement, every ZeRO stage on the GPU, NCCL), then a few runs.
# HFTRAIN_GPU_PEER=1 runs only bench/gpu_peer.py after the CLI's build (issue 60: hftrain beside HF Trainer and
# a plain PyTorch loop, GPT-2 124M and a Llama-3.2-1B shape in bf16; OUT_DIR/peer.txt and OUT_DIR/peer/); with
# HFTRAIN_GPU_TESTS=quick as well it builds hftrain_gpu_tests too and runs its [gpu] tests (the CUDA kernels') first.
set -u
out=${1:?usage: scripts/gpu-check.sh OUT_DIR [build-dir]}
build=${2:-build-cuda}
cd "$(dirname "$0")/.."
mkdir -p "$out"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$out/summary.txt"; }

torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
extra_prefix="" cxxflags="" pkgconf=()
if [ -n "${HFTRAIN_DEPS_DEBS:-}" ]; then
  deps=/tmp/hftrain-deps
  mkdir -p "$deps/root" "$deps/gloo"
  for f in "$HFTRAIN_DEPS_DEBS"/*.deb; do
    dest="$deps/root"; case "$f" in *libgloo*) dest="$deps/gloo" ;; esac
    dpkg -x "$f" "$dest"
  done
  export LD_LIBRARY_PATH="$deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export PKG_CONFIG_SYSROOT_DIR="$deps/root"
  export PKG_CONFIG_LIBDIR="$deps/root/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/root/usr/share/pkgconfig"
  extra_prefix=";$deps/root/usr"
  # These headers win over same-named ones inside LibTorch's include folder (its fmt is not the fmt linked
  # here); gloo's come last, so LibTorch's own gloo headers are used when it ships them.
  cxxflags="-I$deps/root/usr/include -idirafter $deps/gloo/usr/include"
  pkgconf=(-DPKG_CONFIG_EXECUTABLE="$deps/root/usr/bin/pkgconf")
fi

# nvcc for the CUDA kernels (lib/kernels/cuda/, lib/optim/kernels/cuda/): from PATH, else CUDA's usual folder; without
# one the build keeps LibTorch's ops on the GPU (configure.log says "CUDA kernels OFF").
source scripts/find_nvcc.sh  # the working directory is the repository root (above)
nvcc_path=$(find_nvcc)
cuda_flags=(); [ -n "$nvcc_path" ] && cuda_flags=(-DCMAKE_CUDA_COMPILER="$nvcc_path")
{
  nvidia-smi; g++ --version | head -1; cmake --version | head -1; "${nvcc_path:-nvcc}" --version | tail -2
  python3 -c 'import torch,os;print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available());print(sorted(os.listdir(os.path.join(os.path.dirname(torch.__file__),"include"))))'
} > "$out/env.txt" 2>&1
stamp "environment in env.txt"

tests=OFF; short=0
case "${HFTRAIN_GPU_TESTS:-0}" in 1) tests=ON ;; quick) tests=ON short=1 ;; esac
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHFTRAIN_BUILD_TESTS=$tests -DHFTRAIN_BUILD_BENCH=OFF \
      -DCMAKE_PREFIX_PATH="$torch_prefix$extra_prefix" -DCMAKE_CXX_FLAGS="$cxxflags" "${pkgconf[@]}" "${cuda_flags[@]}" \
      > "$out/configure.log" 2>&1 || { stamp "configure FAILED (configure.log)"; exit 1; }
stamp "configured: $(grep 'hftrain: LibTorch' "$out/configure.log")"
# The CLI first; with the tests on, their binary builds in the background while the GPU runs go (the
# side-by-side benchmark waits for it, so its timings see an idle host).
targets=(hftrain); [ $short = 1 ] && targets+=(hftrain_gpu_tests)
rm -f "$build/tests/hftrain_gpu_tests" "$build/hftrain"  # a reused build folder must not run an old binary
timeout "${HFTRAIN_BUILD_TIMEOUT:-480}" cmake --build "$build" --target "${targets[@]}" --parallel "$(nproc)" -- -k 0 \
  > "$out/build.log" 2>&1
rc=$?
summarise_errors() {
  grep -hE "error: |undefined reference" "$@" | sed -E 's/^[^ ]*\/(lib|app|tests)\//\1\//' | sort | uniq -c \
    | sort -rn > "$out/build_errors.txt"
}
summarise_errors "$out/build.log"
stamp "build rc=$rc, $(wc -l < "$out/build_errors.txt") distinct error lines (build_errors.txt)"
if [ ! -x "$build/hftrain" ] && grep -q "CUDA kernels ON" "$out/configure.log"; then
  # The CUDA kernels (not yet compiled on a GPU machine before 2026-12) must not cost the session its runs: keep
  # their errors (build_errors_cuda.txt) and build again with LibTorch's ops on the GPU.
  cp "$out/build_errors.txt" "$out/build_errors_cuda.txt"
  cmake -S . -B "$build" -DHFTRAIN_BUILD_CUDA_KERNELS=OFF >> "$out/configure.log" 2>&1
  timeout "${HFTRAIN_BUILD_TIMEOUT:-480}" cmake --build "$build" --target "${targets[@]}" --parallel "$(nproc)" -- -k 0 \
    > "$out/build_no_cuda_kernels.log" 2>&1
  rc=$?
  summarise_errors "$out/build_no_cuda_kernels.log"
  stamp "CUDA kernels did not build (build_errors_cuda.txt); rebuilt without them: rc=$rc"
fi
[ -x "$build/hftrain" ] || exit 1
if [ "${HFTRAIN_GPU_PEER:-0}" = 1 ]; then
  # The peer benchmark alone (docs/gpu.md "The peer benchmark"): per shape one model directory of random weights
  # (transformers' from_config, about 5 GB for the Llama shape, in /tmp/hftrain-peer, not in OUT_DIR), then
  # hftrain, HF Trainer and the plain loop, HFTRAIN_PEER_STEPS (40) steps each, each side in its own process.
  # Expected on one H100: about 1.5 minutes for GPT-2 124M and 3 for the Llama shape (model loads and imports
  # included; an estimate, not yet measured), so build + benchmark fit one 10-minute command. HFTRAIN_PEER_TIMEOUT
  # (360 s) bounds it: the script's own --time-budget, 20 s less, cuts a side short and still writes the table.
  # HFTRAIN_PEER_SHAPES / HFTRAIN_PEER_SIDES narrow it (e.g. llama-1b, or hftrain,hf); HFTRAIN_PEER_LAUNCHER=torchrun runs
  # every side as torchrun's worker.
  if [ -x "$build/tests/hftrain_gpu_tests" ]; then  # with HFTRAIN_GPU_TESTS=quick too: the [gpu] tests first
    HFTRAIN_REQUIRE_GPU=1 timeout 150 "$build/tests/hftrain_gpu_tests" "[gpu]" > "$out/unit_gpu.log" 2>&1
    stamp "[gpu] tests rc=$? (unit_gpu.log): $(grep -E "test cases|assertions" "$out/unit_gpu.log" | tail -1)"
  fi
  rm -rf /tmp/hftrain-peer
  peer_timeout=${HFTRAIN_PEER_TIMEOUT:-360}
  PYTHONUNBUFFERED=1 timeout "$peer_timeout" python3 bench/gpu_peer.py --hftrain "$build/hftrain" \
    --out "$out/peer" --work /tmp/hftrain-peer --steps "${HFTRAIN_PEER_STEPS:-40}" \
    --time-budget $((peer_timeout - 20)) \
    --shapes "${HFTRAIN_PEER_SHAPES:-gpt2-124m,llama-1b}" --sides "${HFTRAIN_PEER_SIDES:-hftrain,hf,loop,hftrain-ops}" \
    --launcher "${HFTRAIN_PEER_LAUNCHER:-direct}" \
    > "$out/peer.txt" 2>&1
  rc=$?
  rm -rf /tmp/hftrain-peer
  stamp "peer benchmark rc=$rc (peer.txt; logs and results.md in peer/)"
  cat "$out/peer/results.md" >> "$out/summary.txt" 2> /dev/null
  exit $rc
fi
test_build_pid=""
if [ "$tests" = ON ] && [ $short = 0 ]; then
  timeout "${HFTRAIN_BUILD_TIMEOUT:-480}" cmake --build "$build" --parallel "$(( $(nproc) - 4 ))" -- -k 0 \
    > "$out/test_build.log" 2>&1 &
  test_build_pid=$!
fi

hf="$build/hftrain"
run() {  # run NAME SECONDS hftrain-args...: one run, its log appended to runs.log, its last lines in the summary
  local name=$1 secs=$2; shift 2
  echo "===== $name: hftrain $*" >> "$out/runs.log"
  timeout "$secs" "$hf" "$@" > /tmp/hftrain-run.log 2>&1
  local rc=$?
  cat /tmp/hftrain-run.log >> "$out/runs.log"
  stamp "run $name rc=$rc: $(grep -E "train_loss|eval_loss|samples_per_second|error" /tmp/hftrain-run.log | tail -4 | tr '\n' ' ')"
  return $rc
}
quick=(configs/quickstart.yaml --set training.max_steps=300 --set training.eval_steps=300 --set training.logging_steps=50)
if [ $short = 1 ]; then
  failed=0
  if [ -x "$build/tests/hftrain_gpu_tests" ]; then
    # the GPU's own tests, then the device tests written for torch's lazy device (on this build's LibTorch)
    HFTRAIN_REQUIRE_GPU=1 timeout 150 "$build/tests/hftrain_gpu_tests" "[gpu]" > "$out/unit_gpu.log" 2>&1 || failed=1
    stamp "[gpu] tests: $(grep -E 'test cases|All tests passed' "$out/unit_gpu.log" | tail -1)"
    grep -B4 -A8 "FAILED" "$out/unit_gpu.log" | grep -v "^engine memory" | head -60 >> "$out/summary.txt"
    # one process per test file (Catch's file tags), so that a crash in one file leaves the others' results
    for file in test_device_placement test_device_optimizers test_native_comm; do
      timeout 60 "$build/tests/hftrain_gpu_tests" -# "[#$file][device]~[gpu]" >> "$out/unit_device.log" 2>&1
      rc=$?
      [ $rc = 0 ] || failed=1
      if [ $rc -ge 128 ] && command -v gdb > /dev/null; then  # a crash: where it happened
        timeout 120 gdb -batch -ex run -ex bt --args "$build/tests/hftrain_gpu_tests" -# "[#$file][device]~[gpu]" \
          > "$out/gdb_$file.log" 2>&1
        stamp "$file crashed (rc=$rc); backtrace in gdb_$file.log"
      fi
      stamp "[device] tests of $file: $(grep -E 'test cases|All tests passed' "$out/unit_device.log" | tail -1)"
    done
  else
    failed=1
    stamp "hftrain_gpu_tests was not built (build.log)"
  fi
  run gpu_bf16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_bf16 --set precision.bf16=true
  stamp "autocast warnings in gpu_bf16: $(grep -c 'is deprecated' /tmp/hftrain-run.log)"
  # ZeRO-Offload: masters and optimizer state in host memory, the update on the CPU (fp32 should give gpu_fp32's losses)
  run gpu_fp32 90 train "${quick[@]}" --set training.output_dir=/tmp/q_gpu
  run gpu_zero2_offload 90 train "${quick[@]}" --set training.output_dir=/tmp/q_off2 --set zero.stage=2 \
    --set zero.offload_optimizer=cpu || failed=1
  run gpu_zero3_offload_bf16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_off3 --set zero.stage=3 \
    --set zero.offload_optimizer=cpu --set precision.bf16=true || failed=1
  # QLoRA on the device: the base quantised as it is initialised (each weight allocated on the GPU as it arrives),
  # NF4 with double quantisation, then LLM.int8(); LoRA on every linear layer, bf16
  cat > /tmp/qlora_gpu.yaml <<'SPEC'
model: {type: llama, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
        quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true, bnb_4bit_compute_dtype: bfloat16}}
peft: {r: 8, lora_alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}
data: {type: digit_reversal, num_digits: 6}
training: {output_dir: /tmp/q_qlora, max_steps: 100, logging_steps: 25, eval_steps: 100, learning_rate: 0.003}
precision: {bf16: true}
SPEC
  run gpu_qlora4 90 train /tmp/qlora_gpu.yaml || failed=1
  run gpu_qlora8 90 train /tmp/qlora_gpu.yaml --set model.quantization_config.load_in_4bit=false \
    --set model.quantization_config.load_in_8bit=true --set training.output_dir=/tmp/q_qlora8 || failed=1
  # Several ranks on one GPU (distributed.backend gloo deals the workers out round-robin; NCCL refuses two ranks on
  # one device): ZeRO 1-3 on 2 workers of batch 32 beside 1 worker of batch 64 -- the same global batches, so
  # their losses at steps 20, 40 and 60 should agree to the GPU's float rounding
  multi=(configs/quickstart.yaml --set training.max_steps=60 --set training.logging_steps=20 --set training.eval_strategy=no)
  run gpu_one_worker 60 train "${multi[@]}" --set training.output_dir=/tmp/m_1 || failed=1
  stamp "1 worker: $(grep -E "^step (20|40|60)/" /tmp/hftrain-run.log | tr '\n' ' ')"
  for stage in 1 2 3; do
    run gpu_two_workers_zero$stage 120 train "${multi[@]}" --nproc-per-node 2 --set distributed.backend=gloo \
      --set zero.stage=$stage --set training.per_device_train_batch_size=32 --set training.output_dir=/tmp/m_2_$stage || failed=1
    stamp "2 workers on one GPU, ZeRO-$stage: $(grep -E "^step (20|40|60)/" /tmp/hftrain-run.log | tr '\n' ' ')"
  done
  # Resume on the GPU with dropout: steps 21-40 of the resumed run should log what the straight run logged
  # (optimizer state back on the GPU, the CUDA generator restored); a failed resume fails the run itself.
  resume=(configs/quickstart.yaml --set model.dropout=0.1 --set training.max_steps=40 --set training.logging_steps=10
          --set training.eval_strategy=no --set training.save_strategy=steps --set training.save_steps=20)
  rm -rf /tmp/r_a /tmp/r_b
  run gpu_resume_straight 60 train "${resume[@]}" --set training.output_dir=/tmp/r_a || failed=1
  grep -E "^step (30|40)/" /tmp/hftrain-run.log > /tmp/r_a.steps
  run gpu_resume_from_20 60 train "${resume[@]}" --set training.output_dir=/tmp/r_b \
    --set training.resume_from_checkpoint=/tmp/r_a/checkpoint-20 || failed=1
  grep -E "^step (30|40)/" /tmp/hftrain-run.log > /tmp/r_b.steps
  weights=differ; cmp -s /tmp/r_a/checkpoint-40/model.safetensors /tmp/r_b/checkpoint-40/model.safetensors && weights="bitwise equal"
  stamp "resume on the GPU: checkpoint-40 weights of the straight and the resumed run $weights"
  if [ -s /tmp/r_a.steps ] && cmp -s /tmp/r_a.steps /tmp/r_b.steps; then stamp "resume on the GPU: steps 30 and 40 equal"
  else stamp "resume on the GPU differs (look closer: CUDA's atomic adds, e.g. the embedding's backward, are not bitwise repeatable): $(cat /tmp/r_a.steps /tmp/r_b.steps | tr '\n' ' ')"; fi
  run cpu_fp32 120 train "${quick[@]}" --set training.output_dir=/tmp/q_cpu --set training.use_cpu=true
  grep -m1 "Device = " /tmp/hftrain-run.log >> "$out/summary.txt"
  if [ -f "${HFTRAIN_SHAKESPEARE:-}" ] && [ "${HFTRAIN_GPU_BENCH:-1}" = 1 ]; then
    PYTHONUNBUFFERED=1 timeout "${HFTRAIN_BENCH_TIMEOUT:-150}" python3 bench/gpu_compare.py --hftrain "$hf" \
      --text "$HFTRAIN_SHAKESPEARE" --workload gpt2 --steps 30 --repeats 3 --bf16 >> "$out/gpu_compare.txt" 2>&1
    stamp "gpu compare gpt2 bf16: $(tail -1 "$out/gpu_compare.txt")"
  fi
  stamp "done (tests failed: $failed)"
  exit $failed
fi
run gpu_fp32 90 train "${quick[@]}" --set training.output_dir=/tmp/q_gpu
run gpu_zero3_init 90 train "${quick[@]}" --set training.output_dir=/tmp/q_z3 --set zero.stage=3
run gpu_zero3_init_bf16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_z3b --set zero.stage=3 --set precision.bf16=true
run gpu_fp16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_fp16 --set precision.fp16=true
run gpu_zero2_fp16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_z2h --set zero.stage=2 --set precision.fp16=true
run gpu_tf32 90 train "${quick[@]}" --set training.output_dir=/tmp/q_tf32 --set training.tf32=true
run gpu_bf16 90 train "${quick[@]}" --set training.output_dir=/tmp/q_bf16 --set precision.bf16=true
run gpu_predict 60 predict /tmp/q_gpu
run gpu_predict_z3 60 predict /tmp/q_z3
if [ -f "${HFTRAIN_SHAKESPEARE:-}" ]; then
  sk=(configs/shakespeare_char.yaml --set data.path="$HFTRAIN_SHAKESPEARE" --set training.max_steps=300)
  run gpu_nanogpt 120 train "${sk[@]}" --set training.output_dir=/tmp/sk_gpu
fi
if [ -n "$test_build_pid" ]; then
  wait "$test_build_pid"; rc=$?
  summarise_errors "$out/build.log" "$out/test_build.log"
  stamp "test build rc=$rc, $(wc -l < "$out/build_errors.txt") distinct error lines"
  tb="$build/tests/hftrain_unit_tests"
  if [ -x "$tb" ]; then  # the tests written for the GPU first, then the whole unit label
    timeout 120 "$tb" "[gpu]" > "$out/unit_gpu.log" 2>&1
    stamp "[gpu] tests rc=$?: $(grep -E 'test cases|passed|failed' "$out/unit_gpu.log" | tail -2 | tr '\n' ' ')"
    timeout 120 "$tb" "device placement*" > "$out/unit_device.log" 2>&1
    stamp "device placement tests rc=$?: $(grep -E 'test cases' "$out/unit_device.log" | tail -1)"
  fi
fi
if [ -f "${HFTRAIN_SHAKESPEARE:-}" ] && [ "${HFTRAIN_GPU_BENCH:-1}" = 1 ]; then  # against PyTorch's loop on the GPU
  for precision in fp32 bf16; do
    flag=(); [ $precision = bf16 ] && flag=(--bf16)
    PYTHONUNBUFFERED=1 timeout "${HFTRAIN_BENCH_TIMEOUT:-150}" python3 bench/gpu_compare.py --hftrain "$hf" \
      --text "$HFTRAIN_SHAKESPEARE" --workload gpt2 --steps 30 --repeats 2 "${flag[@]}" >> "$out/gpu_compare.txt" 2>&1
    stamp "gpu compare gpt2 $precision: $(tail -1 "$out/gpu_compare.txt")"
  done
fi
run cpu_fp32 120 train "${quick[@]}" --set training.output_dir=/tmp/q_cpu --set training.use_cpu=true
if [ -n "$test_build_pid" ] && [ -x "$build/tests/hftrain_unit_tests" ]; then
  (cd "$build" && timeout "${HFTRAIN_TEST_TIMEOUT:-300}" ctest -j8 --timeout 120 -L unit > "$out/ctest_unit.log" 2>&1)
  stamp "unit tests rc=$?: $(grep -E 'tests passed|tests failed' "$out/ctest_unit.log")"
  grep -E "\*\*\*Failed|Timeout|Exception" "$out/ctest_unit.log" | head -20 >> "$out/summary.txt"
fi
stamp "done"
