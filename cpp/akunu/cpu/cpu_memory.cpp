// Host pages for the CPU backend's buffers (cpu_memory.h).
#include "akunu/cpu/cpu_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace akunu::cpu {

namespace {

constexpr size_t kPage = 4096, kHugePage = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A mapping of `bytes` that starts on a huge page and asks for transparent huge pages: a
// decode step streams every weight once, and in 4 KiB pages each page of it costs a TLB miss
// (what that cost a large GEMV: bench/NOTES.md, "CPU backend: huge pages and prefetched
// tiles"). The slack before the aligned start and after the end is unmapped.
void* map_huge(size_t bytes) {
    const size_t span = round_up(bytes, kPage) + kHugePage;
    void* mem = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    const uintptr_t first = reinterpret_cast<uintptr_t>(mem), start = round_up(first, kHugePage);
    const uintptr_t end = start + round_up(bytes, kPage), last = first + span;
    if (start > first) munmap(mem, start - first);
    if (last > end) munmap(reinterpret_cast<void*>(end), last - end);
    madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // advice: a kernel without THP ignores it
    return reinterpret_cast<void*>(start);
}

}  // namespace

Allocation allocate_pages(size_t bytes) {
    void* mem = nullptr;
    if (bytes >= kHugePage) {
        mem = map_huge(bytes);
    } else {
        mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) mem = nullptr;
    }
    Allocation a;
    if (!mem) return a;
    a.contents = mem;
    a.bytes = bytes;
    return a;
}

void free_pages(const Allocation& a) {
    if (a.contents) munmap(a.contents, size_t(a.bytes));
}

}  // namespace akunu::cpu
