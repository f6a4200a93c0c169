// Block dequantization, following the layouts of ggml-common.h. Blocks are read bytewise with
// memcpy: GGUF only aligns tensors, not blocks (an 18-byte Q4_0 block starts at any offset).
#include "akunu/formats/dequant.h"

#include <cstring>

#include "akunu/core/half.h"

namespace akunu::dequant {

namespace {

template <class T>
inline T rd(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class T>
void plain(const uint8_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = float(rd<T>(src + i * sizeof(T)));
}

// The 6-bit (scale, min) pair j of a K-quant super-block (ggml's get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

}  // namespace

void f32(const uint8_t* src, float* dst, size_t n) { std::memcpy(dst, src, n * 4); }
void f16(const uint8_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = half_at(src + 2 * i);
}
void bf16(const uint8_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(rd<uint16_t>(src + 2 * i));
}
void f64(const uint8_t* src, float* dst, size_t n) { plain<double>(src, dst, n); }
void i8(const uint8_t* src, float* dst, size_t n) { plain<int8_t>(src, dst, n); }
void i16(const uint8_t* src, float* dst, size_t n) { plain<int16_t>(src, dst, n); }
void i32(const uint8_t* src, float* dst, size_t n) { plain<int32_t>(src, dst, n); }
void u8(const uint8_t* src, float* dst, size_t n) { plain<uint8_t>(src, dst, n); }
void u32(const uint8_t* src, float* dst, size_t n) { plain<uint32_t>(src, dst, n); }

// block_q4_0 {half d; u8 qs[16]}: low nibbles are elements 0..15, high nibbles 16..31.
void q4_0(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 18, y += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 16; ++j) {
            y[j] = float((b[2 + j] & 0xF) - 8) * d;
            y[j + 16] = float((b[2 + j] >> 4) - 8) * d;
        }
    }
}

// block_q4_1 {half d; half m; u8 qs[16]}
void q4_1(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 20, y += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        for (int j = 0; j < 16; ++j) {
            y[j] = float(b[4 + j] & 0xF) * d + m;
            y[j + 16] = float(b[4 + j] >> 4) * d + m;
        }
    }
}

// block_q5_0 {half d; u8 qh[4]; u8 qs[16]}: bit j of qh is the 5th bit of element j.
void q5_0(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 22, y += 32) {
        const float d = half_at(b);
        const uint32_t qh = rd<uint32_t>(b + 2);
        for (int j = 0; j < 16; ++j) {
            const int x0 = int((b[6 + j] & 0xF) | (((qh >> j) << 4) & 0x10)) - 16;
            const int x1 = int((b[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
            y[j] = float(x0) * d;
            y[j + 16] = float(x1) * d;
        }
    }
}

// block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}
void q5_1(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 24, y += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        const uint32_t qh = rd<uint32_t>(b + 4);
        for (int j = 0; j < 16; ++j) {
            const uint32_t x0 = (b[8 + j] & 0xF) | (((qh >> j) << 4) & 0x10);
            const uint32_t x1 = (b[8 + j] >> 4) | ((qh >> (j + 12)) & 0x10);
            y[j] = float(x0) * d + m;
            y[j + 16] = float(x1) * d + m;
        }
    }
}

// block_q8_0 {half d; i8 qs[32]}
void q8_0(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 34, y += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
    }
}

// block_q4_K {half d; half dmin; u8 scales[12]; u8 qs[128]}: 8 sub-blocks of 32 with 6-bit
// scales and mins; each 32 bytes of qs hold two sub-blocks (low nibbles, then high nibbles).
void q4_k(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 144) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* q = b + 16;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
        }
    }
}

// block_q5_K {half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as Q4_K, plus a 5th bit
// per element from qh (two bits of each qh byte per 64 elements).
void q5_k(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 176) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* ql = b + 48;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            scale_min_k4(is, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

// block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d}: 6-bit values = 4 low bits from ql
// and 2 high bits from qh, minus 32, with one int8 scale per 16 elements.
void q6_k(const uint8_t* b, float* y, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i, b += 210) {
        const float d = half_at(b + 208);
        const uint8_t* ql = b;
        const uint8_t* qh = b + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * float(sc[is]) * float(q1);
                y[l + 32] = d * float(sc[is + 2]) * float(q2);
                y[l + 64] = d * float(sc[is + 4]) * float(q3);
                y[l + 96] = d * float(sc[is + 6]) * float(q4);
            }
        }
    }
}

}  // namespace akunu::dequant
