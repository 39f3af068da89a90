// The malloc policy: it stands back when the environment tunes malloc, and once applied a large block
// comes from the heap (no mmap) and its memory is reused rather than mapped afresh.
#include <catch2/catch.hpp>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "util/malloc_policy.h"

using namespace hftrain;

TEST_CASE("the malloc policy stands back when the user tunes malloc", "[unit][malloc]") {
  const char* plain[] = {"PATH=/usr/bin", "MALLOC_IS_NOT_A_TUNABLE=1", "GLIBC_TUNABLES=glibc.rtld.nns=2", nullptr};
  CHECK_FALSE(user_tunes_malloc(plain));
  const char* top_pad[] = {"PATH=/usr/bin", "MALLOC_TOP_PAD_=131072", nullptr};
  CHECK(user_tunes_malloc(top_pad));
  const char* tunables[] = {"GLIBC_TUNABLES=glibc.rtld.nns=2:glibc.malloc.mmap_max=4", nullptr};
  CHECK(user_tunes_malloc(tunables));
  CHECK_FALSE(user_tunes_malloc(nullptr));
}

TEST_CASE("with the policy a 64 MiB block is not mmapped and its memory is reused", "[unit][malloc]") {
  if (!keep_freed_memory_for_reuse()) {  // this test process's environment tunes malloc: nothing to check
    WARN("malloc tuned by the environment; policy not applied");
    return;
  }
  const std::size_t size = 64u << 20;  // above glibc's largest mmap threshold (32 MiB)
  const auto mapped_before = mallinfo2().hblkhd;
  char* a = static_cast<char*>(std::malloc(size));
  REQUIRE(a != nullptr);
  std::memset(a, 1, size);
  CHECK(mallinfo2().hblkhd == mapped_before);  // served from the heap, not a fresh mapping
  std::free(a);
  char* b = static_cast<char*>(std::malloc(size));
  REQUIRE(b != nullptr);
  CHECK(b == a);  // the freed block is handed out again (its pages stay resident)
  std::free(b);
}
