// Process memory policy (see malloc_policy.h).
#include "util/malloc_policy.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <limits>

extern char** environ;

namespace hftrain {
namespace {

bool user_tunes_malloc() {
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc.")) return true;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MALLOC_", 7) == 0 && std::strchr(*e, '=') && std::strchr(*e, '=')[-1] == '_') return true;
  return false;
}

}  // namespace

void keep_freed_memory_for_reuse() {
  if (user_tunes_malloc()) return;
  mallopt(M_MMAP_MAX, 0);                                // large blocks from the heap, reused after free
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());  // never give the heap's top back
}

}  // namespace hftrain
