// The KV-cache codes as shaders/include/kv_format.glsl defines them: f16 values, or per-row
// packed codes (q8, int4, fp4) in 32-bit words with one f16 scale per row. A format id is 0
// (f16) or KV_Q8 = 1, KV_INT4 = 2, KV_FP4 = 3. The CPU kernels and the host (rebuilding a recent
// window's rows, kv_recent.h) read codes with these.
#pragma once

#include <cmath>
#include <cstdint>

namespace akunu {

constexpr uint32_t kKvF16 = 0, kKvQ8 = 1, kKvInt4 = 2, kKvFp4 = 3;

inline uint32_t kv_bits(uint32_t f) { return f == kKvQ8 ? 8u : 4u; }
inline uint32_t kv_per_word(uint32_t f) { return 32u / kv_bits(f); }
inline float kv_qmax(uint32_t f) { return f == kKvQ8 ? 127.0f : f == kKvInt4 ? 7.0f : 6.0f; }

// The value of code j of `word`, before scaling (kv_format.glsl kv_code).
inline float kv_code(uint32_t word, uint32_t j, uint32_t f) {
    if (f == kKvFp4) {
        const uint32_t c = (word >> (j * 4u)) & 15u;
        const uint32_t e = (c >> 1) & 3u, m = c & 1u;
        const float mag = e == 0u ? 0.5f * float(m) : (1.0f + 0.5f * float(m)) * float(1u << (e - 1u));
        return (c & 8u) ? -mag : mag;
    }
    const uint32_t bits = kv_bits(f);
    return float(int32_t(word << (32u - (j + 1) * bits)) >> (32 - bits));  // sign-extended field
}

// The code bits of y = value / scale (kv_format.glsl kv_encode); ties round to even.
inline uint32_t kv_encode(float y, uint32_t f) {
    if (f == kKvFp4) {
        const float a = std::fabs(y);
        const uint32_t c = uint32_t(a > 0.25f) + uint32_t(a > 0.75f) + uint32_t(a > 1.25f) + uint32_t(a > 1.75f) +
                           uint32_t(a > 2.5f) + uint32_t(a > 3.5f) + uint32_t(a > 5.0f);
        return y < 0.0f ? c | 8u : c;
    }
    const float lim = f == kKvInt4 ? 7.0f : 127.0f;
    const float r = std::fmin(std::fmax(std::nearbyint(y), -lim - (f == kKvInt4 ? 1.0f : 0.0f)), lim);
    return uint32_t(int32_t(r)) & (f == kKvInt4 ? 0xFu : 0xFFu);
}

}  // namespace akunu
