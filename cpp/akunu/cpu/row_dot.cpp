// Scalar row dot products (dequantize a block, multiply-add) and the run-time choice.
#include "akunu/cpu/row_dot.h"

#include "akunu/core/kv_codes.h"

#include <algorithm>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/weight_rows.h"
#include "akunu/core/half.h"

namespace akunu::cpu {

namespace {

float dot_f32(const uint8_t* row, const float* x, size_t k) {
    const float* w = reinterpret_cast<const float*>(row);
    float s = 0.0f;
    for (size_t i = 0; i < k; ++i) s += w[i] * x[i];
    return s;
}

// Any type: dequantize 256 elements at a time (a whole number of every type's blocks).
template <TensorType T>
float dot_blocks(const uint8_t* row, const float* x, size_t k) {
    static const WeightType& w = weight_type(uint32_t(T));
    float buf[256];
    float s = 0.0f;
    for (size_t k0 = 0; k0 < k; k0 += 256) {
        const size_t n = std::min<size_t>(256, k - k0);
        dequant_range(w, row, k0, k0 + n, buf);
        for (size_t i = 0; i < n; ++i) s += buf[i] * x[k0 + i];
    }
    return s;
}

void gemm_tile_scalar(const float* wt, size_t n, const float* x, size_t ldx, size_t m, size_t k, float* acc) {
    for (size_t i = 0; i < m; ++i)
        for (size_t kk = 0; kk < k; ++kk) {
            const float xv = x[i * ldx + kk];
            for (size_t j = 0; j < n; ++j) acc[i * 64 + j] += xv * wt[kk * 64 + j];
        }
}

void half_row_scalar(const uint16_t* in, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

}  // namespace

HalfRowFn half_row() { return use_avx2() ? half_row_avx2() : half_row_scalar; }

void f16_row_scalar(const uint8_t* in, float* out, size_t n) {
    half_row_scalar(reinterpret_cast<const uint16_t*>(in), out, n);
}

void q8_row_scalar(const uint8_t* in, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = float(int8_t(in[i]));
}

void int4_row_scalar(const uint8_t* in, float* out, size_t n) {
    for (size_t i = 0; i < n / 2; ++i) {
        out[2 * i] = float(int8_t(uint8_t(in[i] << 4)) >> 4);
        out[2 * i + 1] = float(int8_t(in[i]) >> 4);
    }
}

void fp4_row_scalar(const uint8_t* in, float* out, size_t n) {
    static const struct Table {
        float v[16];
        Table() {
            for (uint32_t c = 0; c < 16; ++c) v[c] = kv_code(c, 0, kKvFp4);
        }
    } fp4;
    for (size_t i = 0; i < n / 2; ++i) {
        out[2 * i] = fp4.v[in[i] & 15u];
        out[2 * i + 1] = fp4.v[in[i] >> 4];
    }
}

CodeRowFn kv_row_reader(uint32_t format) {
    if (use_avx2()) return kv_row_reader_avx2(format);
    return format == kKvF16    ? f16_row_scalar
           : format == kKvQ8   ? q8_row_scalar
           : format == kKvInt4 ? int4_row_scalar
                               : fp4_row_scalar;
}

DequantFn fast_dequant(TensorType type) {
    if (use_avx2())
        if (DequantFn f = dequant_avx2(type)) return f;
    return type_traits(type).dequant;
}

GemmTileFn gemm_tile() { return use_avx512() ? gemm_tile_avx512() : use_avx2() ? gemm_tile_avx2() : gemm_tile_scalar; }

GemmTileFn gemm_tile_for(CpuIsa isa) {
    return isa == CpuIsa::kAvx512 ? gemm_tile_avx512() : isa == CpuIsa::kAvx2 ? gemm_tile_avx2() : gemm_tile_scalar;
}

RowDotFn row_dot_scalar(TensorType type) {
    switch (type) {
        case TensorType::F32: return dot_f32;
        case TensorType::F16: return dot_blocks<TensorType::F16>;
        case TensorType::BF16: return dot_blocks<TensorType::BF16>;
        case TensorType::Q8_0: return dot_blocks<TensorType::Q8_0>;
        case TensorType::Q4_0: return dot_blocks<TensorType::Q4_0>;
        case TensorType::Q4_1: return dot_blocks<TensorType::Q4_1>;
        case TensorType::Q5_0: return dot_blocks<TensorType::Q5_0>;
        case TensorType::Q5_1: return dot_blocks<TensorType::Q5_1>;
        case TensorType::Q4_K: return dot_blocks<TensorType::Q4_K>;
        case TensorType::Q5_K: return dot_blocks<TensorType::Q5_K>;
        case TensorType::Q6_K: return dot_blocks<TensorType::Q6_K>;
        default: return nullptr;
    }
}

RowDotFn row_dot(TensorType type) {
    if (use_avx2())
        if (RowDotFn f = row_dot_avx2(type)) return f;
    return row_dot_scalar(type);
}

}  // namespace akunu::cpu
