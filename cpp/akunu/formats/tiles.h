// Tile-major weights: how the CPU backend stores every projection matrix (docs/architecture.md,
// "Tile-major weights").
//
// A [N, K] matrix becomes ceil(N / 32) tiles of 32 rows; a tile holds, for each block column
// b (K / block_size of them), the blocks of its 32 rows at that column, regrouped so that one
// contiguous load feeds 32 (or 8) output rows:
//
//   tile column = [ header field f of rows 0..31 ]      f16 fields, 64 bytes each
//                 [ chunk c of rows 0..31 ]...          the rest of each block, c chunks
//
// A block's header field f of row r sits at f * 64 + r * 2; its chunk c (chunk_bytes each) at
// header_fields * 64 + (c * 32 + r) * chunk_bytes. With 4-byte chunks, 32 bytes hold 4 codes
// of each of 8 rows: the shape integer dot products want (one 32-bit lane per row). For the
// float types a block is one element, so a tile column is column k of 32 rows, and the matrix
// is [N / 32, K, 32]. k-quant super-blocks move whole (one chunk per block). Rows past N are zero.
//
// Vulkan devices keep Q8_0, Q4_0 and Q4_1 in tiles of 16-byte chunks instead (the *_T32V types):
// a row's 16 code bytes (Q8_0: its first or last 16) are one chunk, so that the GPU's GEMV
// loads them as one 16-byte vector per invocation, 512 contiguous bytes across 32 rows. Four
// 4-byte loads of the CPU layout's chunks read the same bytes but slow Q8_0's decode
// (bench/NOTES.md, "Tile GEMV: 16-byte code loads, and 1,024 invocations with whole rows of x
// for GEMVs of few tiles").
//
// Tiles are fixed once at load (weights.cpp); the GEMV/GEMM kernels for the *_T32 types
// (kernels_tiles.cpp; on Vulkan devices gemv_tiles.comp and weights.glsl's W_TILES) read them.
// The bytes equal the file's, plus the padding of the last tile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "akunu/formats/tensor_types.h"

namespace akunu {
// Which projection matrices a device keeps tile-major rather than in the file's row layout:
// none, the 32-element block formats (Q8_0, Q4_0, Q4_1), every type the tile table covers, or
// all of those but Q5_0 and Q5_1 (the CPU backend with tuning q5_tiles=0).
enum class WeightTiles { kNone, kBlocks32, kAll, kAllButQ5 };
}  // namespace akunu

namespace akunu::cpu {

constexpr size_t kTileRows = 32;

struct TileLayout {
    TensorType tiled;  // Q4_0_T32
    TensorType base;  // Q4_0
    uint32_t header_fields;  // f16 fields at the start of each block (d; d and m for q4_1)
    uint32_t chunk_bytes;  // the rest of the block is interleaved in chunks of this size
    const char* kernel_suffix;  // what kernel names add to the base type's: "_t32", "_t32v"
};

// The tile form of `base` on a device that keeps `which` matrices in tiles, or null when it
// keeps `base` as it is (MLX types; on Vulkan devices everything but Q8_0, Q4_0 and Q4_1).
const TileLayout* tile_layout_for(TensorType base, WeightTiles which = WeightTiles::kAll);
// The kernel name of a weight type's variant: ("gemv", Q4_0) -> "gemv_q4_0", a tile-major form
// adding its layout's suffix ("gemv_q4_0_t32v"). The engine's launchers and the CPU backend's
// kernel registry both name kernels so.
std::string variant_name(const char* kernel, TensorType type);
// The layout of a *_T32 type, or null when `tiled` is none.
const TileLayout* tile_layout(TensorType tiled);

// Bytes of one tile: 32 rows of k elements.
size_t tile_bytes(const TileLayout& l, size_t k);
// Bytes of a [rows, k] matrix in tiles (rows rounded up to whole tiles).
size_t tiled_bytes(const TileLayout& l, size_t rows, size_t k);

// Regroups a [rows, k] matrix of type l.base (ggml's row layout) into tiles at dst, on up to
// `threads` threads (tiles are independent).
void pack_tiles(const TileLayout& l, const uint8_t* src, size_t rows, size_t k, uint8_t* dst, unsigned threads = 1);

}  // namespace akunu::cpu
