// The CPU backend's reads of a quantized cache row (cpu/kv_codes.h KvSide::values, which reads
// the packed words as bytes) against the code-by-code definition (core/kv_codes.h kv_code, the
// one kv_format.glsl mirrors): every format, every code value in every position of a word
// (random words and all 256 byte values), over head sizes 8, 40, 64 and 256.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "akunu/core/half.h"
#include "akunu/core/kv_codes.h"
#include "akunu/cpu/kv_codes.h"
#include "akunu/cpu/row_dot.h"

namespace akunu::test {

TEST(CpuKvCodes, RowValuesEqualTheCodesOneByOne) {
    std::mt19937 rng(7);
    for (uint32_t f : {kKvQ8, kKvInt4, kKvFp4}) {
        for (uint32_t head_dim : {8u, 40u, 64u, 256u}) {
            const uint32_t per = kv_per_word(f), words = head_dim / per;
            for (int trial = 0; trial < 20; ++trial) {
                std::vector<uint32_t> row(words);
                for (uint32_t w = 0; w < words; ++w) {
                    // The first words run through all 256 byte values in every byte position.
                    const uint32_t byte = (uint32_t(trial) * words + w) % 256u;
                    row[w] = trial < 13 ? byte * 0x01010101u : uint32_t(rng());
                }
                cpu::KvSide side{{}, f, head_dim};
                const cpu::KvRowMap::Row r{reinterpret_cast<uint8_t*>(row.data()), nullptr};
                std::vector<float> got(head_dim, -999.0f);
                side.values(r, got.data());
                for (uint32_t i = 0; i < head_dim; ++i)
                    ASSERT_EQ(got[i], kv_code(row[i / per], i % per, f))
                        << "format " << f << " head_dim " << head_dim << " element " << i << " word 0x" << std::hex
                        << row[i / per];
            }
        }
    }
}

// The readers a side takes (AVX2 where the processor has it) against the scalar ones, bit for
// bit (-0 included), over row lengths that leave tails past their 8 and 16 values a pass.
TEST(CpuKvCodes, ReadersEqualTheScalarOnes) {
    std::mt19937 rng(11);
    std::vector<uint8_t> bytes(1200);
    for (uint8_t& b : bytes) b = uint8_t(rng());
    for (uint16_t* h = reinterpret_cast<uint16_t*>(bytes.data()); h < reinterpret_cast<uint16_t*>(bytes.data()) + 600;
         ++h)
        if ((*h & 0x7C00) == 0x7C00) *h &= 0xBFFF;  // finite halves: NaN payloads need not match
    const struct {
        uint32_t format;
        cpu::CodeRowFn scalar;
    } readers[] = {{kKvF16, cpu::f16_row_scalar},
                   {kKvQ8, cpu::q8_row_scalar},
                   {kKvInt4, cpu::int4_row_scalar},
                   {kKvFp4, cpu::fp4_row_scalar}};
    for (const auto& rd : readers)
        for (const size_t n : {2u, 8u, 14u, 16u, 30u, 64u, 256u, 594u}) {  // at most 1,188 bytes (f16)
            std::vector<float> got(n, 0.5f), want(n, 0.5f);
            cpu::kv_row_reader(rd.format)(bytes.data(), got.data(), n);
            rd.scalar(bytes.data(), want.data(), n);
            for (size_t i = 0; i < n; ++i)
                ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "format " << rd.format << ", element " << i;
            EXPECT_EQ(got, want) << "format " << rd.format << ", " << n << " values";
        }
}

TEST(CpuKvCodes, F16RowsAreTheirHalves) {
    const uint16_t row[8] = {0x3C00, 0xC000, 0x0000, 0x8000, 0x7BFF, 0x0001, 0x3555, 0xFBFF};
    cpu::KvSide side{{}, kKvF16, 8};
    const cpu::KvRowMap::Row r{reinterpret_cast<uint8_t*>(const_cast<uint16_t*>(row)), nullptr};
    float got[8];
    side.values(r, got);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], half_to_float(row[i])) << i;
}

}  // namespace akunu::test
