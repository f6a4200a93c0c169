// From memory, the loads of the 16-bit tile GEMV products fell behind the hardware prefetcher:
// they fetch the block column kPrefetchColumns columns ahead themselves (the next tile's first
// ones past a tile's end). All but the AVX2 q8_0 product, whose byte stream the hardware
// prefetcher kept ahead of and which read slower with it (bench/NOTES.md, "CPU backend: huge
// pages and prefetched tiles" and "CPU backend: q8_0 and q4 GEMVs with AVX-512 VNNI").
// Included by the AVX2 and AVX-512 tile products.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace akunu::cpu {

constexpr size_t kPrefetchColumns = 2;

// Every cache line of `bytes` from p, into L1.
static inline void prefetch_column(const uint8_t* p, size_t bytes) {
    for (size_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
}

}  // namespace akunu::cpu
