// IEEE half and bfloat16 conversions on the host (round to nearest even), for uploads and
// CPU references. GPU kernels convert in hardware.
#pragma once

#include <cstdint>
#include <cstring>

namespace akunu {

inline uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) return uint16_t(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));  // inf / nan
    if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds past the largest half: inf
    if (abs < 0x38800000u) {  // subnormal half or zero
        if (abs < 0x33000000u) return uint16_t(sign);
        const uint32_t shift = 126u - (abs >> 23);  // 14..24
        const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return uint16_t(sign | h);
    }
    uint32_t h = ((abs - 0x38000000u) >> 13);
    const uint32_t rem = abs & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return uint16_t(sign | h);
}

inline float half_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {  // subnormal: normalise
            int e = -1;
            uint32_t m = mant;
            do {
                ++e;
                m <<= 1;
            } while (!(m & 0x400u));
            x = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3FFu) << 13;
        }
    } else if (exp == 31) {
        x = sign | 0x7F800000u | mant << 13;
    } else {
        x = sign | (exp + 112u) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// An f16 field at any address (GGUF blocks and tiles store them unaligned).
inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_to_float(h);
}

inline float bf16_to_float(uint16_t b) {
    const uint32_t x = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

}  // namespace akunu
