// The CPU weight-type table and partial-row dequantization.
#include "akunu/cpu/weight_rows.h"

#include <algorithm>

#include "akunu/cpu/row_dot.h"
#include "akunu/core/error.h"

namespace akunu::cpu {

const std::vector<WeightType>& weight_types() {
    static const std::vector<WeightType> table = [] {
        struct Row {
            TensorType t;
            const char *e, *v, *m;
        };
        const Row rows[] = {
            {TensorType::F32, "embed_f32", "gemv_f32", "gemm_f32"},
            {TensorType::F16, "embed_f16", "gemv_f16", "gemm_f16"},
            {TensorType::BF16, "embed_bf16", "gemv_bf16", "gemm_bf16"},
            {TensorType::Q8_0, "embed_q8_0", "gemv_q8_0", "gemm_q8_0"},
            {TensorType::Q4_0, "embed_q4_0", "gemv_q4_0", "gemm_q4_0"},
            {TensorType::Q4_1, "embed_q4_1", "gemv_q4_1", "gemm_q4_1"},
            {TensorType::Q5_0, "embed_q5_0", "gemv_q5_0", "gemm_q5_0"},
            {TensorType::Q5_1, "embed_q5_1", "gemv_q5_1", "gemm_q5_1"},
            {TensorType::Q4_K, "embed_q4_k", "gemv_q4_k", "gemm_q4_k"},
            {TensorType::Q5_K, "embed_q5_k", "gemv_q5_k", "gemm_q5_k"},
            {TensorType::Q6_K, "embed_q6_k", "gemv_q6_k", "gemm_q6_k"},
        };
        std::vector<WeightType> out;
        for (const Row& r : rows) {
            const TensorTypeTraits& t = type_traits(r.t);
            out.push_back({r.t, r.e, r.v, r.m, t.block_size, t.block_bytes, fast_dequant(r.t)});
        }
        return out;
    }();
    return table;
}

const WeightType& weight_type(uint32_t type) {
    for (const WeightType& w : weight_types())
        if (uint32_t(w.type) == type) return w;
    throw Error("CPU kernels: no weight type with id " + std::to_string(type));
}

void dequant_range(const WeightType& w, const uint8_t* row, size_t e0, size_t e1, float* out) {
    if (e1 <= e0) return;
    if (w.block_size == 1) {
        w.dequant(row + e0 * w.block_bytes, out, e1 - e0);
        return;
    }
    float block[256];  // the largest block (k-quants)
    for (size_t b = e0 / w.block_size; b * w.block_size < e1; ++b) {
        const size_t first = b * w.block_size;
        const size_t lo = std::max(first, e0), hi = std::min(first + w.block_size, e1);
        if (lo == first && hi == first + w.block_size) {
            w.dequant(row + b * w.block_bytes, out + (first - e0), 1);
            continue;
        }
        w.dequant(row + b * w.block_bytes, block, 1);
        std::copy(block + (lo - first), block + (hi - first), out + (lo - e0));
    }
}

}  // namespace akunu::cpu
