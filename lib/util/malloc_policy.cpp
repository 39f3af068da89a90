// Process memory policy (see malloc_policy.h).
#include "util/malloc_policy.h"

#include <malloc.h>

#include <cstring>
#include <limits>

extern char** environ;

namespace hftrain {

bool user_tunes_malloc(const char* const* env) {
  for (; env && *env; ++env) {
    const char* eq = std::strchr(*env, '=');
    if (!eq) continue;
    if (std::strncmp(*env, "GLIBC_TUNABLES=", 15) == 0 && std::strstr(eq, "glibc.malloc.")) return true;
    if (std::strncmp(*env, "MALLOC_", 7) == 0 && eq[-1] == '_') return true;  // MALLOC_TOP_PAD_=... etc.
  }
  return false;
}

bool keep_freed_memory_for_reuse() {
  if (user_tunes_malloc(environ)) return false;
  mallopt(M_MMAP_MAX, 0);                                      // large blocks from the heap, reused after free
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());  // never give the heap's top back
  return true;
}

bool return_freed_memory_promptly() {
  if (user_tunes_malloc(environ)) return false;
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // fixed: every block above 1 MiB is its own mapping, unmapped on free
  return true;
}

}  // namespace hftrain
