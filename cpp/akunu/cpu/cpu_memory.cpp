// Host pages for the CPU backend's buffers (cpu_memory.h).
#include "akunu/cpu/cpu_memory.h"

#include <sys/mman.h>

namespace akunu::cpu {

Allocation allocate_pages(size_t bytes) {
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Allocation a;
    if (mem == MAP_FAILED) return a;
    a.contents = mem;
    a.bytes = bytes;
    return a;
}

void free_pages(const Allocation& a) {
    if (a.contents) munmap(a.contents, size_t(a.bytes));
}

}  // namespace akunu::cpu
