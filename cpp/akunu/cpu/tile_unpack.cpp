// Scalar tile unpacking and the run-time choice (tile_unpack.h).
#include "akunu/cpu/tile_unpack.h"

#include <cstring>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/formats/tiles.h"
#include "akunu/core/half.h"

namespace akunu::cpu {

namespace {

void unpack_scalar(TensorType type, const uint8_t* tile, size_t b0, size_t nb, float (*wt)[kGemmTile], size_t c0) {
    using T = TensorType;
    const TileLayout& l = *tile_layout(type);
    const TensorTypeTraits& base = type_traits(l.base);
    const size_t bb = base.block_bytes;
    for (size_t b = b0; b < b0 + nb; ++b) {
        const uint8_t* column = tile + b * kTileRows * bb;
        float (*w)[kGemmTile] = wt + (b - b0) * base.block_size;
        if (base.block_size == 1) {  // f32, f16, bf16: the traits' dequantizer on 32 elements
            base.dequant(column, w[0] + c0, kTileRows);
        } else if (l.header_fields == 0) {  // k-quants: whole super-blocks
            float e[256];
            for (size_t r = 0; r < kTileRows; ++r) {
                base.dequant(column + r * bb, e, 1);
                for (size_t i = 0; i < base.block_size; ++i) w[i][c0 + r] = e[i];
            }
        } else {  // 32-element blocks: q8_0, q4_0, q4_1, q5_0, q5_1 (tile_dot.h Block32)
            const bool q5 = type == T::Q5_0_T32 || type == T::Q5_1_T32;
            const uint8_t* codes = column + l.header_fields * 64 + (q5 ? 128 : 0);
            const int off = type == T::Q4_0_T32 ? 8 : type == T::Q5_0_T32 ? 16 : 0;
            for (size_t r = 0; r < kTileRows; ++r) {
                const float d = half_at(column + r * 2), m = l.header_fields > 1 ? half_at(column + 64 + r * 2) : 0.0f;
                uint32_t qh = 0;
                if (q5) std::memcpy(&qh, column + l.header_fields * 64 + r * 4, 4);
                for (size_t c = 0; c < 8 && type == T::Q8_0_T32; ++c)
                    for (size_t e = 0; e < 4; ++e)
                        w[c * 4 + e][c0 + r] = d * float(int8_t(codes[(c * kTileRows + r) * 4 + e]));
                for (size_t j = 0; j < 4 && type != T::Q8_0_T32; ++j)
                    for (size_t e = 0; e < 4; ++e) {
                        const size_t i = j * 4 + e;
                        const uint8_t byte = codes[(j * kTileRows + r) * 4 + e];
                        const int lo = (byte & 15) | int(qh >> i & 1) << 4, hi = (byte >> 4) | int(qh >> (16 + i) & 1)
                                                                                                   << 4;
                        w[i][c0 + r] = d * float(lo - off) + m;
                        w[16 + i][c0 + r] = d * float(hi - off) + m;
                    }
            }
        }
    }
}

}  // namespace

TileUnpackFn tile_unpack_scalar() { return unpack_scalar; }

TileUnpackFn tile_unpack(TensorType tiled) {
    if (use_avx2())
        if (TileUnpackFn f = tile_unpack_avx2(tiled)) return f;
    return unpack_scalar;
}

}  // namespace akunu::cpu
