// The CPU backend's memory: anonymous mappings, page-aligned and zero-filled, whose pages are
// touched on first use. The host pointer is also the address kernels reach it through.
#pragma once

#include <cstddef>

#include "akunu/vulkan/memory.h"

namespace akunu::cpu {

// An empty Allocation (contents null) when memory runs out.
Allocation allocate_pages(size_t bytes);
void free_pages(const Allocation& a);

}  // namespace akunu::cpu
