// The 5-bit 32-element block formats Q5_0 and Q5_1 (ggml-common.h layouts), read in place from
// the weight buffer in the file's row layout: w_block8() for the GEMM, embedding and
// dequantization (8 elements), w_lane_dot() for the GEMV (4 lanes per block). Included by
// weights.glsl, which declares the 16-bit view wh[] of the weights.
//
//   block_q5_0 {half d; u8 qh[4]; u8 qs[16]}          w = d * (q - 16)
//   block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}  w = d * q + m
//
// Element e (0..31) keeps its low 4 bits in qs[e % 16] (the low nibble for e < 16, the high
// one for e >= 16) and its 5th bit in bit e of qh, a little-endian 32-bit word. Q5_0's blocks
// are 22 bytes, so only 2-byte aligned: every word is put together from 16-bit loads.
#ifndef AKUNU_Q5_GLSL
#define AKUNU_Q5_GLSL

#define W_BLOCK 32
#define W_LANES 4
#if defined(WTYPE_Q5_0)
#define W_BLOCK_BYTES 22
#define Q5_QH 1  // 16-bit word of qh in a block
#else
#define W_BLOCK_BYTES 24
#define Q5_QH 2
#endif
#define Q5_QS (Q5_QH + 2)

// The 32-bit little-endian word at 16-bit word w.
uint q5_word(uint w) { return uint(wh[w]) | (uint(wh[w + 1]) << 16); }
// The four bytes of u as floats, lowest first.
vec4 q5_bytes(uint u) { return vec4(u & 255u, (u >> 8) & 255u, (u >> 16) & 255u, u >> 24); }
// Bits 0..3 of h moved to bit 4 of bytes 0..3: four codes' 5th bits.
uint q5_high(uint h) { return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25); }

// (d, m): w = d * q + m, with Q5_0's m = -16 d.
vec2 q5_head(uint w) {
#if defined(WTYPE_Q5_0)
    const float d = w_half_word(w);
    return vec2(d, -16.0 * d);
#else
    return unpackHalf2x16(q5_word(w));
#endif
}

// Part p holds elements 8p .. 8p + 7: qs bytes 8 (p & 1) .. + 7, nibbles low for p < 2.
void w_block8(uint block, uint part, out float v[8]) {
    const uint w = block * (W_BLOCK_BYTES / 2), shift = part >= 2 ? 4 : 0;
    const vec2 dm = q5_head(w);
    const uint qh = q5_word(w + Q5_QH) >> (8 * part), q = w + Q5_QS + 4 * (part & 1u);
    const uint lo[2] = uint[2](q5_word(q) >> shift, q5_word(q + 2) >> shift);
    for (uint j = 0; j < 8; ++j) {
        const uint code = ((lo[j / 4] >> (8 * (j % 4))) & 15u) | (((qh >> j) & 1u) << 4);
        v[j] = dm.x * float(code) + dm.y;
    }
}

#ifdef W_X4
// Lane l reads qs bytes 4l .. 4l + 3: elements 4l .. 4l + 3 in their low nibbles and 16 + 4l ..
// 16 + 4l + 3 in their high ones, with qh bits 4l .. 4l + 3 and 16 + 4l .. 16 + 4l + 3.
float w_lane_dot(uint block, uint xblock, uint lane) {
    const uint w = block * (W_BLOCK_BYTES / 2);
    const uint qh = q5_word(w + Q5_QH), qs = q5_word(w + Q5_QS + 2 * lane);
    const vec4 lo = q5_bytes((qs & 0x0F0F0F0Fu) | q5_high(qh >> (4 * lane)));
    const vec4 hi = q5_bytes(((qs >> 4) & 0x0F0F0F0Fu) | q5_high(qh >> (16 + 4 * lane)));
    const vec4 xa = W_X4(xblock * 8 + lane), xb = W_X4(xblock * 8 + 4 + lane);
    const vec2 dm = q5_head(w);
    return dm.x * (dot(lo, xa) + dot(hi, xb)) + dm.y * dot(xa + xb, vec4(1.0));
}
#endif  // W_X4

#endif
