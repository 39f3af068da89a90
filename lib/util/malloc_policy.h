// Process memory policy: freed tensor memory stays in the process for the next step instead of going
// back to the kernel. glibc serves blocks above its mmap threshold (at most 32 MiB) with a fresh mmap and
// returns them with munmap on free, so every step pays page faults again for its large activations
// (the GPT-2-shaped benchmark: 2.97 M minor faults in 4 steps). With mmap off for the heap and no
// trimming, the same run had 1.05 M faults and was 15 % faster (25.0 -> 21.2 s), peak RSS 3.44 ->
// 4.03 GB (the Python loop: 4.1 GB); nanoGPT and mlp unchanged within noise (README "Memory").
#pragma once

namespace hftrain {

// True when `environ`-style `env` tunes malloc: GLIBC_TUNABLES with a glibc.malloc key, or a
// MALLOC_*_ variable (glibc spells them with a trailing underscore, e.g. MALLOC_TOP_PAD_).
bool user_tunes_malloc(const char* const* env);

// mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, max), unless the process environment tunes
// malloc already. Returns whether the policy was applied. main() calls it for the commands that run
// model steps in a loop (train), before any of its work.
bool keep_freed_memory_for_reuse();

// For every other command (eval and predict, and the streaming zero-to-fp32 and checkpoint convert, whose
// peak must stay one tensor run above the baseline): a fixed 1 MiB mmap threshold. glibc's default
// raises its threshold to the size of the first large block freed (up to 32 MiB) and serves later blocks
// from the heap, where they fragment: converting a 225 MiB state to 4 workers peaked 123 MiB higher that
// way (363 vs 240 MiB).
bool return_freed_memory_promptly();

}  // namespace hftrain
