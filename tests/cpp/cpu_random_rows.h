// Random weight rows of every type for the CPU backend's tests (test_cpu_backend.cpp,
// test_cpu_tiles.cpp): block scales kept small and finite.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "akunu/cpu/weight_rows.h"
#include "akunu/core/half.h"

namespace akunu::test {

// Random rows of every weight type: block scales kept small and finite.
inline std::vector<uint8_t> random_row(const cpu::WeightType& w, size_t k, std::mt19937& rng) {
    std::vector<uint8_t> row(k / w.block_size * w.block_bytes);
    for (auto& b : row) b = uint8_t(rng());
    if (w.type == TensorType::F32) {
        std::uniform_real_distribution<float> u(-1, 1);
        for (size_t i = 0; i < k; ++i) {
            const float f = u(rng);
            std::memcpy(row.data() + 4 * i, &f, 4);
        }
    } else if (w.type == TensorType::F16 || w.type == TensorType::BF16) {
        for (size_t i = 0; i < k; ++i) {  // exponent bits kept moderate
            row[2 * i + 1] = uint8_t((row[2 * i + 1] & 0x83) | (w.type == TensorType::F16 ? 0x30 : 0x3C));
        }
    } else {
        // Every block-scale half of the 32-element formats and of the k-quants' leading d/dmin.
        const uint16_t h = float_to_half(0.01f);
        for (size_t b = 0; b < k / w.block_size; ++b) {
            uint8_t* blk = row.data() + b * w.block_bytes;
            const size_t at = w.type == TensorType::Q6_K ? w.block_bytes - 2 : 0;
            std::memcpy(blk + at, &h, 2);
            if (w.type == TensorType::Q4_1 || w.type == TensorType::Q5_1 || w.type == TensorType::Q4_K ||
                w.type == TensorType::Q5_K)
                std::memcpy(blk + 2, &h, 2);
        }
    }
    return row;
}

}  // namespace akunu::test
