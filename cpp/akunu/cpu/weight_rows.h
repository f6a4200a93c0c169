// Weight types as the CPU kernels see them: one row per type with a GEMV/GEMM/embedding variant
// (the rows of shaders/kernels.cmake), its block geometry and its dequantizer, plus row access
// in ggml's layouts ([rows, k] row-major; block formats: rows of k / block_size blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "akunu/formats/tensor_types.h"

namespace akunu::cpu {

struct WeightType {
    TensorType type;
    const char* embed_kernel;  // "embed_q4_0"
    const char* gemv_kernel;
    const char* gemm_kernel;
    uint32_t block_size;  // elements per block (1 for float types)
    uint32_t block_bytes;
    DequantFn dequant;  // blocks -> floats (row_dot.h fast_dequant)

    // Row r of a [rows, k] matrix.
    const uint8_t* row(const uint8_t* base, size_t r, size_t k) const {
        return base + r * (k / block_size) * block_bytes;
    }
};

const std::vector<WeightType>& weight_types();
// The row for a TensorType value (CpuArgs::variant of the weight kernels).
const WeightType& weight_type(uint32_t type);

// Writes elements [e0, e1) of a row to out[0 : e1 - e0].
void dequant_range(const WeightType& w, const uint8_t* row, size_t e0, size_t e1, float* out);

}  // namespace akunu::cpu
