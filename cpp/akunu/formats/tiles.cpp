// The tile layouts and the packing done at load.
#include "akunu/formats/tiles.h"

#include <cctype>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace akunu::cpu {

namespace {

using T = TensorType;

// The CPU backend's (WeightTiles::kAll), then Vulkan devices' (kBlocks32).
const TileLayout kLayouts[] = {
    {T::F32_T32, T::F32, 0, 4, "_t32"},
    {T::F16_T32, T::F16, 0, 2, "_t32"},
    {T::BF16_T32, T::BF16, 0, 2, "_t32"},
    {T::Q8_0_T32, T::Q8_0, 1, 4, "_t32"},
    {T::Q4_0_T32, T::Q4_0, 1, 4, "_t32"},
    {T::Q4_1_T32, T::Q4_1, 2, 4, "_t32"},
    {T::Q4_K_T32, T::Q4_K, 0, 144, "_t32"},
    {T::Q5_K_T32, T::Q5_K, 0, 176, "_t32"},
    {T::Q6_K_T32, T::Q6_K, 0, 210, "_t32"},
    // Q5_0/Q5_1: the 4 bytes of fifth bits (qh) are chunk 0, the nibbles chunks 1-4.
    {T::Q5_0_T32, T::Q5_0, 1, 4, "_t32"},
    {T::Q5_1_T32, T::Q5_1, 2, 4, "_t32"},
};
const TileLayout kVectorLayouts[] = {
    {T::Q8_0_T32V, T::Q8_0, 1, 16, "_t32v"},
    {T::Q4_0_T32V, T::Q4_0, 1, 16, "_t32v"},
    {T::Q4_1_T32V, T::Q4_1, 2, 16, "_t32v"},
};

// Float types: column k of a tile is element k of its 32 rows.
template <class E>
void pack_elements(const uint8_t* src, size_t rows, size_t k, uint8_t* dst) {
    for (size_t r = 0; r < rows; ++r) {
        const E* row = reinterpret_cast<const E*>(src) + r * k;
        E* tile = reinterpret_cast<E*>(dst) + r / kTileRows * k * kTileRows + r % kTileRows;
        for (size_t i = 0; i < k; ++i) tile[i * kTileRows] = row[i];
    }
}

}  // namespace

const TileLayout* tile_layout_for(TensorType base, WeightTiles which) {
    if (which == WeightTiles::kNone) return nullptr;
    if (which == WeightTiles::kBlocks32) {
        for (const TileLayout& l : kVectorLayouts)
            if (l.base == base) return &l;
        return nullptr;
    }
    if (which == WeightTiles::kAllButQ5 && (base == T::Q5_0 || base == T::Q5_1)) return nullptr;
    for (const TileLayout& l : kLayouts)
        if (l.base == base) return &l;
    return nullptr;
}

const TileLayout* tile_layout(TensorType tiled) {
    for (const TileLayout& l : kLayouts)
        if (l.tiled == tiled) return &l;
    for (const TileLayout& l : kVectorLayouts)
        if (l.tiled == tiled) return &l;
    return nullptr;
}

size_t tile_bytes(const TileLayout& l, size_t k) {
    const TensorTypeTraits& t = type_traits(l.base);
    return k / t.block_size * t.block_bytes * kTileRows;
}

size_t tiled_bytes(const TileLayout& l, size_t rows, size_t k) {
    return (rows + kTileRows - 1) / kTileRows * tile_bytes(l, k);
}

namespace {

// Tiles [first, last) of a block-format matrix. Each tile is regrouped in `scratch` (cached
// memory) and then copied out whole, so that `dst`, which may be write-combined device memory,
// is written once and in order.
void pack_block_tiles(const TileLayout& l, const uint8_t* src, size_t rows, size_t k, uint8_t* dst, size_t first,
                      size_t last) {
    const TensorTypeTraits& t = type_traits(l.base);
    const size_t blocks = k / t.block_size, bb = t.block_bytes;
    const size_t header = l.header_fields * 2, chunks = (bb - header) / l.chunk_bytes;
    std::vector<uint8_t> scratch(tile_bytes(l, k));
    for (size_t tile = first; tile < last; ++tile) {
        const size_t tile_rows = std::min(kTileRows, rows - tile * kTileRows);
        if (tile_rows < kTileRows) std::fill(scratch.begin(), scratch.end(), 0);  // rows past N are zero
        for (size_t r = 0; r < tile_rows; ++r) {
            const uint8_t* row = src + (tile * kTileRows + r) * blocks * bb;
            for (size_t b = 0; b < blocks; ++b) {
                const uint8_t* block = row + b * bb;
                uint8_t* column = scratch.data() + b * kTileRows * bb;
                for (size_t f = 0; f < l.header_fields; ++f) std::memcpy(column + f * 64 + r * 2, block + f * 2, 2);
                for (size_t c = 0; c < chunks; ++c)
                    std::memcpy(column + kTileRows * header + (c * kTileRows + r) * l.chunk_bytes,
                                block + header + c * l.chunk_bytes, l.chunk_bytes);
            }
        }
        std::memcpy(dst + tile * scratch.size(), scratch.data(), scratch.size());
    }
}

}  // namespace

void pack_tiles(const TileLayout& l, const uint8_t* src, size_t rows, size_t k, uint8_t* dst, unsigned threads) {
    const TensorTypeTraits& t = type_traits(l.base);
    if (t.block_size == 1) {
        std::memset(dst, 0, tiled_bytes(l, rows, k));
        (t.block_bytes == 4 ? pack_elements<uint32_t> : pack_elements<uint16_t>)(src, rows, k, dst);
        return;
    }
    const size_t tiles = (rows + kTileRows - 1) / kTileRows;
    const size_t n = std::max<size_t>(1, std::min<size_t>(threads, tiles / 4));  // a few tiles per thread at least
    std::vector<std::thread> pool;
    for (size_t i = 1; i < n; ++i)
        pool.emplace_back(pack_block_tiles, std::cref(l), src, rows, k, dst, tiles * i / n, tiles * (i + 1) / n);
    pack_block_tiles(l, src, rows, k, dst, 0, tiles / n);
    for (std::thread& th : pool) th.join();
}

std::string variant_name(const char* kernel, TensorType type) {
    if (const TileLayout* l = tile_layout(type)) return variant_name(kernel, l->base) + l->kernel_suffix;
    std::string suffix = type_traits(type).name;
    for (char& ch : suffix) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return std::string(kernel) + "_" + suffix;
}

}  // namespace akunu::cpu
