// Tiles (tiles.h) back to floats: the CPU GEMM's weight panels (matmul_parts.h), dequantized
// once per chunk of k and reused by every token row. Scalar for every tile type, AVX2 for the
// types prefill spends its time on (f16, q8_0, q4_0, q4_1, q5_0, q5_1), chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/matmul_parts.h"
#include "akunu/formats/tensor_types.h"

namespace akunu::cpu {

// Block columns [b0, b0 + nb) of one tile of type `tiled`, as floats, into wt[kk][c0 + r]
// (kk counts elements from block b0; r < 32 is the tile's row).
using TileUnpackFn = void (*)(TensorType tiled, const uint8_t* tile, size_t b0, size_t nb, float (*wt)[kGemmTile],
                              size_t c0);

TileUnpackFn tile_unpack(TensorType tiled);
// Each tier's version (tests compare them); the AVX2 one is null for types it lacks.
TileUnpackFn tile_unpack_scalar();
TileUnpackFn tile_unpack_avx2(TensorType tiled);

}  // namespace akunu::cpu
