// Scalar tile products (tile_dot.h) and the run-time choice.
#include "akunu/cpu/tile_dot.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/kquant_gemv.h"
#include "akunu/formats/quantize.h"
#include "akunu/formats/tiles.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/core/half.h"

namespace akunu::cpu {

namespace {

// Element e of row r in a float tile column.
template <TensorType T>
float tile_element(const uint8_t* tile, size_t i, size_t r) {
    if constexpr (T == TensorType::F32_T32) {
        float f;
        std::memcpy(&f, tile + (i * kTileRows + r) * 4, 4);
        return f;
    } else if constexpr (T == TensorType::F16_T32) {
        return half_at(tile + (i * kTileRows + r) * 2);
    } else {
        uint16_t h;
        std::memcpy(&h, tile + (i * kTileRows + r) * 2, 2);
        const uint32_t u = uint32_t(h) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
}

template <TensorType T>
void gemv_float(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    for (size_t r = 0; r < kTileRows; ++r) out[r] = 0.0f;
    for (size_t i = 0; i < k; ++i)
        for (size_t r = 0; r < kTileRows; ++r) out[r] += tile_element<T>(tile, i, r) * x.f[i];
}

// The short GEMM on a float tile, row by row (the tiers' reference).
template <TensorType T>
void rows_float(const uint8_t* tile, const float* x, size_t ldx, size_t m, size_t k, float* out) {
    for (size_t i = 0; i < m; ++i) {
        TileX xi;
        xi.f = x + i * ldx;
        gemv_float<T>(tile, xi, k, out + i * kTileRows);
    }
}

// Row r's fifth bits of block column `column` (q5 types; 0 for the others).
template <TensorType T>
uint32_t fifth_bits(const uint8_t* column, size_t r) {
    uint32_t qh = 0;
    if constexpr (Block32<T>::fifth) std::memcpy(&qh, column + Block32<T>::header + r * 4, 4);
    return qh;
}

// The 32-element block types: integer block sums, scaled as tile_dot.h states; x in 8 bits
// (x.q) or in 16 bits (x.q16, its groups of 4 in kX16Order). A q5 code is its nibble plus 16
// times its bit of qh.
template <TensorType T, XForm Form>
void gemv_int(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    using B = Block32<T>;
    for (size_t r = 0; r < kTileRows; ++r) out[r] = 0.0f;
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * B::bytes;
        const uint8_t* codes = column + B::qs;
        auto xq = [&](size_t i) -> int32_t {  // element i of the block
            if constexpr (Form == XForm::kInt8)
                return x.q[b * 32 + i];
            else
                return x.q16[b * 32 + (i & ~size_t(3)) + kX16Order[i & 3]];
        };
        for (size_t r = 0; r < kTileRows; ++r) {
            int32_t s = 0;
            if constexpr (B::q8) {
                for (size_t c = 0; c < 8; ++c)
                    for (size_t e = 0; e < 4; ++e) s += int8_t(codes[(c * kTileRows + r) * 4 + e]) * xq(c * 4 + e);
            } else {
                const uint32_t qh = fifth_bits<T>(column, r);
                for (size_t j = 0; j < 4; ++j)
                    for (size_t e = 0; e < 4; ++e) {
                        const size_t i = j * 4 + e;
                        const uint8_t byte = codes[(j * kTileRows + r) * 4 + e];
                        const int32_t lo = (byte & 15) | ((qh >> i & 1) << 4),
                                      hi = (byte >> 4) | ((qh >> (16 + i) & 1) << 4);
                        s += lo * xq(i) + hi * xq(16 + i);
                    }
                s -= B::offset * x.sum[b];
            }
            out[r] = std::fma(float(s), half_at(column + r * 2) * x.d[b], out[r]);
            // The minimum: through x's rounded sum in 8 bits (tile_dot.h says why), its exact
            // sum in 16 bits (x's rounding is then too small to matter either way).
            if constexpr (B::minimum)
                out[r] = std::fma(half_at(column + 64 + r * 2),
                                  Form == XForm::kInt8 ? x.d[b] * float(x.sum[b]) : x.fsum[b], out[r]);
        }
    }
}

// The 32-element block types in fp32: per block, sum_j code * x_j, then the scale
// (tile_dot.h). Two partial sums per row (q4, q5: low and high nibbles; q8: bytes 0-1 and 2-3
// of each chunk), added at the end of the block: the AVX2 version's order exactly.
template <TensorType T>
void gemv_quant(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    using B = Block32<T>;
    for (size_t r = 0; r < kTileRows; ++r) out[r] = 0.0f;
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * B::bytes;
        const uint8_t* codes = column + B::qs;
        const float* xb = x.f + b * 32;
        for (size_t r = 0; r < kTileRows; ++r) {
            [[maybe_unused]] const uint32_t qh = fifth_bits<T>(column, r);
            float sa = 0.0f, sb = 0.0f;
            for (size_t c = 0; c < (B::q8 ? 8 : 4); ++c) {
                const uint8_t* v = codes + (c * kTileRows + r) * 4;
                if constexpr (B::q8) {
                    sa = std::fma(float(int8_t(v[0])), xb[c * 4], sa);
                    sb = std::fma(float(int8_t(v[2])), xb[c * 4 + 2], sb);
                    sa = std::fma(float(int8_t(v[1])), xb[c * 4 + 1], sa);
                    sb = std::fma(float(int8_t(v[3])), xb[c * 4 + 3], sb);
                } else {
                    for (size_t e = 0; e < 4; ++e) {
                        const size_t i = c * 4 + e;
                        sa = std::fma(float((v[e] & 15) | ((qh >> i & 1) << 4)), xb[i], sa);
                        sb = std::fma(float((v[e] >> 4) | ((qh >> (16 + i) & 1) << 4)), xb[16 + i], sb);
                    }
                }
            }
            float s = sa + sb;
            if constexpr (B::offset != 0) s = std::fma(-float(B::offset), x.fsum[b], s);
            out[r] = std::fma(s, half_at(column + r * 2), out[r]);
            if constexpr (B::minimum) out[r] = std::fma(half_at(column + 64 + r * 2), x.fsum[b], out[r]);
        }
    }
}

// k-quants: each super-block dequantized (the traits table's decoder), then multiplied.
template <TensorType Base>
void gemv_superblocks(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    const TensorTypeTraits& t = type_traits(Base);
    float w[256];
    for (size_t r = 0; r < kTileRows; ++r) out[r] = 0.0f;
    for (size_t b = 0; b < k / 256; ++b)
        for (size_t r = 0; r < kTileRows; ++r) {
            t.dequant(tile + (b * kTileRows + r) * t.block_bytes, w, 1);
            float s = 0.0f;
            for (size_t i = 0; i < 256; ++i) s += w[i] * x.f[b * 256 + i];
            out[r] += s;
        }
}

// k-quants with x in 16 bits (kquant_gemv.h): the exact code sums as plain loops.
template <TensorType Base>
void gemv_kquant16(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr size_t sub = kquant::kSub<Base>;
    kquant::kquant_gemv16<Base>(tile, x, k, out, [](const int16_t* q, const int16_t* xq, int32_t* sums) {
        for (size_t s = 0; s < 256 / sub; ++s) {
            int32_t v = 0;
            for (size_t i = s * sub; i < (s + 1) * sub; ++i) v += int32_t(q[i]) * int32_t(xq[i]);
            sums[s] = v;
        }
    });
}

}  // namespace

TileGemvFn tile_gemv_scalar(TensorType tiled, XForm form) {
    const bool int8 = form == XForm::kInt8, int16 = form == XForm::kInt16;
    using T = TensorType;
    switch (tiled) {
        case T::F32_T32: return form != XForm::kFloat ? nullptr : gemv_float<T::F32_T32>;
        case T::F16_T32: return form != XForm::kFloat ? nullptr : gemv_float<T::F16_T32>;
        case T::BF16_T32: return form != XForm::kFloat ? nullptr : gemv_float<T::BF16_T32>;
        case T::Q8_0_T32:
            return int8    ? gemv_int<T::Q8_0_T32, XForm::kInt8>
                   : int16 ? gemv_int<T::Q8_0_T32, XForm::kInt16>
                           : gemv_quant<T::Q8_0_T32>;
        case T::Q4_0_T32:
            return int8    ? gemv_int<T::Q4_0_T32, XForm::kInt8>
                   : int16 ? gemv_int<T::Q4_0_T32, XForm::kInt16>
                           : gemv_quant<T::Q4_0_T32>;
        case T::Q4_1_T32:
            return int8    ? gemv_int<T::Q4_1_T32, XForm::kInt8>
                   : int16 ? gemv_int<T::Q4_1_T32, XForm::kInt16>
                           : gemv_quant<T::Q4_1_T32>;
        case T::Q5_0_T32:
            return int8 ? nullptr : int16 ? gemv_int<T::Q5_0_T32, XForm::kInt16> : gemv_quant<T::Q5_0_T32>;
        case T::Q5_1_T32:
            return int8 ? nullptr : int16 ? gemv_int<T::Q5_1_T32, XForm::kInt16> : gemv_quant<T::Q5_1_T32>;
        case T::Q4_K_T32: return int8 ? nullptr : int16 ? gemv_kquant16<T::Q4_K> : gemv_superblocks<T::Q4_K>;
        case T::Q5_K_T32: return int8 ? nullptr : int16 ? gemv_kquant16<T::Q5_K> : gemv_superblocks<T::Q5_K>;
        case T::Q6_K_T32: return int8 ? nullptr : int16 ? gemv_kquant16<T::Q6_K> : gemv_superblocks<T::Q6_K>;
        default: return nullptr;
    }
}

TileRowsFn tile_rows_for(TensorType tiled, CpuIsa isa) {
    if (isa == CpuIsa::kAvx512) return tile_rows_avx512(tiled);
    if (isa == CpuIsa::kAvx2) return tile_rows_avx2(tiled);
    switch (tiled) {
        case TensorType::F32_T32: return rows_float<TensorType::F32_T32>;
        case TensorType::F16_T32: return rows_float<TensorType::F16_T32>;
        case TensorType::BF16_T32: return rows_float<TensorType::BF16_T32>;
        default: return nullptr;
    }
}

TileRowsFn tile_rows(TensorType tiled) { return tile_rows_for(tiled, cpu_isa()); }

bool tile_wants_block_sums(TensorType tiled, XForm form) {
    if (form == XForm::kInt8) return false;
    if (form == XForm::kInt16 && tile_sum_block(tiled) == 16) return true;  // k-quants
    // The minimums; in fp32 also q4_0's and q5_0's offsets.
    const bool minimum = tiled == TensorType::Q4_1_T32 || tiled == TensorType::Q5_1_T32;
    return minimum || (form == XForm::kFloat && (tiled == TensorType::Q4_0_T32 || tiled == TensorType::Q5_0_T32));
}

TileGemvFn tile_gemv(TensorType tiled, XForm form) {
    if (use_avx512_vnni())
        if (TileGemvFn f = tile_gemv_avx512(tiled, form)) return f;
    if (use_avx2())
        if (TileGemvFn f = tile_gemv_avx2(tiled, form)) return f;
    return tile_gemv_scalar(tiled, form);
}

TileIntRowsFn tile_int_rows(TensorType tiled) { return use_avx512_vnni() ? tile_int_rows_avx512(tiled) : nullptr; }

void block_sums(const float* x, size_t k, size_t n, float* fsum) {
    for (size_t b = 0; b < k / n; ++b) {
        float s = 0.0f;
        for (size_t j = 0; j < n; ++j) s += x[b * n + j];
        fsum[b] = s;
    }
}

size_t tile_sum_block(TensorType tiled) {
    const TileLayout* l = tile_layout(tiled);
    return l && l->header_fields == 0 && type_traits(l->base).block_size == 256 ? 16 : 32;
}

QuantizeFn quantize_x_scalar() { return quantize::q8_0_codes; }

namespace {

// A NaN or infinity in x has no integer code: its block's scale becomes NaN, so the block's
// products are NaN as the float path's (and a Vulkan device's) would be, rather than 0.
void keep_nonfinite(const float* x, size_t k, float* d) {
    for (size_t b = 0; b < k / 32; ++b) {
        float zero = 0.0f;  // x * 0 is 0 for every finite x, NaN otherwise
        for (size_t j = 0; j < 32; ++j) zero += x[b * 32 + j] * 0.0f;
        if (zero != 0.0f) d[b] = std::numeric_limits<float>::quiet_NaN();
    }
}

}  // namespace

void quantize_x(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
    static const QuantizeFn f = use_avx2() ? quantize_x_avx2() : quantize_x_scalar();
    f(x, k, q, d, sum);
    keep_nonfinite(x, k, d);
}

void quantize_x16(const float* x, size_t k, int16_t* q16, float* d, int32_t* sum, bool interleave) {
    vec_math().quantize16(x, k, q16, d, sum, interleave);  // a non-finite block's scale is NaN already
}

}  // namespace akunu::cpu
