#include "model/core/heap.h"

#include <malloc.h>

#include <cstddef>

// tcmalloc's C entry point, weak: absent when the binary does not link tcmalloc.
extern "C" void MallocExtension_ReleaseToSystem(size_t num_bytes) __attribute__((weak));

namespace tgraph {

void ReleaseFreedMemory(int64_t bytes) {
  if (bytes <= 0) return;
  if (MallocExtension_ReleaseToSystem) {
    MallocExtension_ReleaseToSystem(static_cast<size_t>(bytes));
  } else {
    malloc_trim(0);
  }
}

}  // namespace tgraph
