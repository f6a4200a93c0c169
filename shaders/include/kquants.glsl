// The GGUF k-quant super-block formats Q4_K, Q5_K and Q6_K (256 elements per block, ggml's
// ggml-common.h layouts), read in place from the weight buffer: w_block8() for the GEMM and
// embedding (8 elements), w_lane_dot() for the GEMV (16 lanes per block). Included by
// weights.glsl, which declares the byte and 16-bit views wb[] and wh[] of the weights.
//
// Q4_K and Q5_K blocks (144 and 176 bytes) start on 4-byte boundaries and are read as 32-bit
// words. A Q6_K block is 210 bytes, so every other block starts 2 bytes past a word boundary:
// its words are put together from two 16-bit loads.
#ifndef AKUNU_KQUANTS_GLSL
#define AKUNU_KQUANTS_GLSL

#define W_BLOCK 256
#define W_LANES 16

// The four bytes of u as floats, lowest first.
vec4 k_bytes(uint u) { return vec4(u & 255u, (u >> 8) & 255u, (u >> 16) & 255u, u >> 24); }

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// block_q4_K {half d; half dmin; u8 scales[12]; u8 qs[128]}
// block_q5_K {half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
// Sub-block s (elements 32s .. 32s + 31) is d * scale_s * q - dmin * min_s, with 6-bit scales and
// mins packed into the 12 scale bytes. qs byte 32 * (s / 2) + l holds element l of sub-block s in
// its low nibble for even s, its high nibble for odd s; Q5_K adds bit s of qh[l] as the 5th bit.
#if defined(WTYPE_Q4_K)
#define W_BLOCK_BYTES 144
#define K_QS 16  // byte offset of qs
#else
#define W_BLOCK_BYTES 176
#define K_QH 16
#define K_QS 48
#endif
layout(std430, binding = W_BINDING) readonly buffer Ww { uint ww[]; };

// (scale, min) of sub-block s: ggml's get_scale_min_k4 on the scale bytes at byte `b` + 4.
vec2 k_scale_min(uint b, uint s) {
    const uint q = b + 4;
    if (s < 4) return vec2(uint(wb[q + s]) & 63u, uint(wb[q + s + 4]) & 63u);
    const uint hi = uint(wb[q + s + 4]);
    return vec2((hi & 15u) | ((uint(wb[q + s - 4]) >> 6) << 4), (hi >> 4) | ((uint(wb[q + s]) >> 6) << 4));
}

void w_block8(uint block, uint part, out float v[8]) {
    const uint b = block * W_BLOCK_BYTES, s = part / 4, l = (part % 4) * 8;
    const vec2 dm = unpackHalf2x16(ww[b / 4]) * k_scale_min(b, s);  // (d * scale, dmin * min)
    const uint at = (b + K_QS + 32 * (s / 2) + l) / 4, shift = 4 * (s & 1u);
    const uint q[2] = uint[2](ww[at] >> shift, ww[at + 1] >> shift);
#if defined(WTYPE_Q5_K)
    const uint h[2] = uint[2](ww[(b + K_QH + l) / 4] >> s, ww[(b + K_QH + l) / 4 + 1] >> s);
#endif
    for (uint j = 0; j < 8; ++j) {
        uint x = (q[j / 4] >> (8 * (j % 4))) & 15u;
#if defined(WTYPE_Q5_K)
        x |= ((h[j / 4] >> (8 * (j % 4))) & 1u) << 4;
#endif
        v[j] = dm.x * float(x) - dm.y;
    }
}

#ifdef W_X4
// Lane l = 8p + t (p in 0..1, t in 0..7) takes qs word t of the 32-byte groups p and p + 2:
// sub-blocks j, j + 1 (group p's low and high nibbles) and j + 4, j + 5, with j = 2p. The 16 lanes
// of a block thus read its 128 qs bytes as two runs of 64 contiguous bytes. Those four
// sub-blocks take their scales and mins from bytes j, j + 1 of each 4-byte third of the scale
// bytes, so three word loads (the same for all lanes) give all four.
float w_lane_dot(uint block, uint xblock, uint lane) {
    const uint w = block * (W_BLOCK_BYTES / 4), p = lane / 8, t = lane % 8;
    const uvec3 sw = uvec3(ww[w + 1], ww[w + 2], ww[w + 3]) >> (16 * p);
    const uvec2 a = uvec2(sw.x, sw.x >> 8) & 255u, m = uvec2(sw.y, sw.y >> 8) & 255u, c = uvec2(sw.z, sw.z >> 8) & 255u;
    const vec4 scale = vec4(a & 63u, (c & 15u) | ((a >> 6) << 4));     // sub-blocks j, j+1, j+4, j+5
    const vec4 mins = vec4(m & 63u, (c >> 4) | ((m >> 6) << 4));
    const uint q0 = ww[w + K_QS / 4 + 8 * p + t], q1 = ww[w + K_QS / 4 + 8 * (p + 2) + t];
    // Elements 4t .. 4t + 3 of each sub-block, as nibbles.
    vec4 n0 = k_bytes(q0 & 0x0F0F0F0Fu), n1 = k_bytes((q0 >> 4) & 0x0F0F0F0Fu);
    vec4 n2 = k_bytes(q1 & 0x0F0F0F0Fu), n3 = k_bytes((q1 >> 4) & 0x0F0F0F0Fu);
#if defined(WTYPE_Q5_K)
    const uint h = ww[w + K_QH / 4 + t], j = 2 * p;
    n0 += 16.0 * k_bytes((h >> j) & 0x01010101u);
    n1 += 16.0 * k_bytes((h >> (j + 1)) & 0x01010101u);
    n2 += 16.0 * k_bytes((h >> (j + 4)) & 0x01010101u);
    n3 += 16.0 * k_bytes((h >> (j + 5)) & 0x01010101u);
#endif
    const uint x0 = xblock * 64 + 16 * p + t;  // vec4 index of element 64p + 4t
    const vec4 xa = W_X4(x0), xb = W_X4(x0 + 8), xc = W_X4(x0 + 32), xd = W_X4(x0 + 40);
    const vec4 dots = vec4(dot(n0, xa), dot(n1, xb), dot(n2, xc), dot(n3, xd));
    const vec4 sums = vec4(dot(xa, vec4(1.0)), dot(xb, vec4(1.0)), dot(xc, vec4(1.0)), dot(xd, vec4(1.0)));
    const vec2 dm = unpackHalf2x16(ww[w]);
    return dm.x * dot(scale, dots) - dm.y * dot(mins, sums);
}
#endif  // W_X4

#elif defined(WTYPE_Q6_K)
// block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d}: element 128h + 32g + l (h in 0..1,
// g in 0..3, l in 0..31) is d * scales[8h + 2g + l / 16] * (q - 32), q holding 4 low bits from
// ql[64h + 32 (g % 2) + l] (low nibble for g < 2, high nibble otherwise) and 2 high bits from
// bits 2g, 2g + 1 of qh[32h + l].
#define W_BLOCK_BYTES 210

// The 32-bit little-endian word at an even byte offset.
uint k_word(uint byte) { return uint(wh[byte / 2]) | (uint(wh[byte / 2 + 1]) << 16); }

void w_block8(uint block, uint part, out float v[8]) {
    const uint b = block * W_BLOCK_BYTES, e = 8 * part;
    const uint h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint ql = b + 64 * h + 32 * (g % 2) + l, qh = b + 128 + 32 * h + l;
    const uint lo[2] = uint[2](k_word(ql) >> (4 * (g / 2)), k_word(ql + 4) >> (4 * (g / 2)));
    const uint hi[2] = uint[2](k_word(qh) >> (2 * g), k_word(qh + 4) >> (2 * g));
    const float d = w_half_word((b + 208) / 2) * float(int8_t(wb[b + 192 + 8 * h + 2 * g + l / 16]));
    for (uint j = 0; j < 8; ++j) {
        const uint shift = 8 * (j % 4);
        const uint q = ((lo[j / 4] >> shift) & 15u) | (((hi[j / 4] >> shift) & 3u) << 4);
        v[j] = d * (float(q) - 32.0);
    }
}

#ifdef W_X4
// Lane l = 8h + t (h in 0..1, t in 0..7) takes elements 4t .. 4t + 3 of the four 32-element
// groups of half h: ql bytes 64h + 4t and 64h + 32 + 4t, qh bytes 32h + 4t (4 each), so the 16
// lanes read ql and qh as runs of 32 and 64 contiguous bytes. Its elements share scale index
// l / 16 = t / 4 within each group.
float w_lane_dot(uint block, uint xblock, uint lane) {
    const uint b = block * W_BLOCK_BYTES, h = lane / 8, t = lane % 8;
    const uint la = k_word(b + 64 * h + 4 * t), lb = k_word(b + 64 * h + 32 + 4 * t);
    const uint qh = k_word(b + 128 + 32 * h + 4 * t);
    const vec4 q0 = k_bytes((la & 0x0F0F0F0Fu) | ((qh << 4) & 0x30303030u));
    const vec4 q1 = k_bytes((lb & 0x0F0F0F0Fu) | ((qh << 2) & 0x30303030u));
    const vec4 q2 = k_bytes(((la >> 4) & 0x0F0F0F0Fu) | (qh & 0x30303030u));
    const vec4 q3 = k_bytes(((lb >> 4) & 0x0F0F0F0Fu) | ((qh >> 2) & 0x30303030u));
    const uint sc = b + 192 + 8 * h + t / 4;
    const vec4 scale = vec4(int8_t(wb[sc]), int8_t(wb[sc + 2]), int8_t(wb[sc + 4]), int8_t(wb[sc + 6]));
    const uint x0 = xblock * 64 + 32 * h + t;  // vec4 index of element 128h + 4t
    const vec4 xa = W_X4(x0), xb = W_X4(x0 + 8), xc = W_X4(x0 + 16), xd = W_X4(x0 + 24);
    const vec4 dots = vec4(dot(q0 - 32.0, xa), dot(q1 - 32.0, xb), dot(q2 - 32.0, xc), dot(q3 - 32.0, xd));
    return w_half_word(b / 2 + 104) * dot(scale, dots);
}
#endif  // W_X4

#endif  // WTYPE_Q6_K

#endif
