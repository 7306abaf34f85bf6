// Giving freed heap memory back to the system. The allocator keeps what is freed for
// reuse (tcmalloc, which the server and the trainer link, in its page heap; glibc in its
// arenas), so after a large transient allocation (a module parsed and featurized, a
// graph file's configurations read and compressed) the process would stay that large.
// Any thread; the call costs a few system calls per released span.
#pragma once

#include <cstdint>

namespace tgraph {

// Returns at least `bytes` of freed heap memory to the system when the allocator holds
// that much (tcmalloc's MallocExtension_ReleaseToSystem when linked, else glibc's
// malloc_trim, which returns what it can).
void ReleaseFreedMemory(int64_t bytes);

}  // namespace tgraph
