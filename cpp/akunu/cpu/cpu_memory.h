// The CPU backend's memory: anonymous mappings, page-aligned and zero-filled, whose pages are
// touched on first use. The host pointer is also the address kernels reach it through.
#pragma once

#include <cstddef>
#include <string>

#include "akunu/vulkan/memory.h"

namespace akunu::cpu {

// Throws akunu::Error with `what_else` (the device and what akunu holds) when memory runs out.
Allocation allocate_pages(size_t bytes, const std::string& what_else);
void free_pages(const Allocation& a);

}  // namespace akunu::cpu
