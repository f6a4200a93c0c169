// tile_blocks.glsl: what the tile GEMVs (gemv_tiles.comp, gemm_rows.comp) share about a block
// of a tile-major Q8_0, Q4_0 or Q4_1 matrix: its load (LOAD_BLOCK), its dot product with the
// staged x (block_dot) and the staging of x (stage_x). gemv_tiles.comp explains the formats'
// bit tricks. The includer declares the staging arrays first: xq, xr (uvec4s, two a block) and
// xb (X_INT8, with X16), or xs and xb, indexed by block of the staging.
#if defined(WTYPE_Q8_0)
#define CHUNKS 8
#define CODE_OFFSET 128.0  // codes read as q + 128
#elif defined(WTYPE_Q4_0)
#define CHUNKS 4
#define CODE_OFFSET 8.0    // nibble n stands for n - 8
#else
#define CHUNKS 4
#define CODE_OFFSET 0.0    // Q4_1: codes as they are (m times the sum of x is the offset)
#endif
// What an invocation loads of one block of its row: the head (d, and m for Q4_1) and the codes.
struct Block {
    uint head;
    uint q[CHUNKS];
};

// Row r's block in a tile column of matrix `part` (weights.glsl's tile addressing, per
// binding). `part` is the same for the whole workgroup: a uniform branch.
#if defined(WTYPE_Q4_1)
#define LOAD_HEAD(H) \
    w.head = uint(H[w_tile_head_at(column, r, 0)]) | (uint(H[w_tile_head_at(column, r, 1)]) << 16)
#else
#define LOAD_HEAD(H) w.head = uint(H[w_tile_head_at(column, r, 0)])
#endif
// The codes: one 16-byte load (Q8_0: two) per row and block, 512 contiguous bytes across a
// tile's 32 rows.
#define LOAD_BLOCK(V, H)                                                                        \
    {                                                                                           \
        LOAD_HEAD(H);                                                                           \
        [[unroll]] for (uint v = 0; v < CHUNKS / 4; ++v) {                                      \
            const uvec4 q = V[w_tile_vec_at(column, r, v)];                                     \
            w.q[4 * v] = q.x, w.q[4 * v + 1] = q.y, w.q[4 * v + 2] = q.z, w.q[4 * v + 3] = q.w; \
        }                                                                                       \
    }
#ifdef X_INT8
// dot(block b of the slice, x rounded) for one row: 4-way integer dot products of the weights'
// codes against x's codes (X16: each byte plane), scaled once per block by d and x's step.
float block_dot(Block w, uint b) {
    // The block's 32 codes of x as two 16-byte words each: one shared load per 16 codes.
    const uvec4 q_lo = xq[2 * b], q_hi = xq[2 * b + 1];
    const uvec4 r_lo = X16 ? xr[2 * b] : uvec4(0), r_hi = X16 ? xr[2 * b + 1] : uvec4(0);
    int s = 0, sl = 0;
    [[unroll]] for (uint c = 0; c < CHUNKS; ++c) {
#if defined(WTYPE_Q8_0)
        s += DOT_S8(c < 4 ? q_lo[c] : q_hi[c - 4], w.q[c]);
        if (X16) sl += DOT_S8_U8(w.q[c], c < 4 ? r_lo[c] : r_hi[c - 4]);
#else
        const uint lo = w.q[c] & 0x0F0F0F0Fu, hi = (w.q[c] >> 4) & 0x0F0F0F0Fu;
        s += DOT_S8_U8(q_lo[c], lo) + DOT_S8_U8(q_hi[c], hi);
        if (X16) sl += DOT_U8(r_lo[c], lo) + DOT_U8(r_hi[c], hi);
#endif
    }
    if (X16) s = s * 256 + sl;  // exact: 32 products of |code| <= 128 and |x code| <= 32768 < 2^31
    const vec2 head = unpackHalf2x16(w.head), step_sum = xb[b];
    const float fs = float(s);
#if defined(WTYPE_Q4_1)
    return head.x * step_sum.x * fs + head.y * step_sum.y;  // d n + m
#elif defined(WTYPE_Q4_0)
    return head.x * (step_sum.x * fs - 8.0 * step_sum.y);   // nibble n stands for n - 8
#else
    return head.x * step_sum.x * fs;
#endif
}
#else
// The scale of the staged x under vec4 j (0..7) of a block: 256 under bytes and low nibbles
// (elements 0..15), 16 under high nibbles (elements 16..31).
float x_scale(uint j) {
#if defined(WTYPE_Q8_0)
    return 256.0;
#else
    return j < 4 ? 256.0 : 16.0;
#endif
}

// dot(block b of the slice, x) for one row.
float block_dot(Block w, uint b) {
    float s = 0.0;
    [[unroll]] for (uint c = 0; c < CHUNKS; ++c) {
#if defined(WTYPE_Q8_0)
        const uint u = w.q[c] ^ 0x80808080u;  // signed bytes q as q + 128
#else
        const uint u = w.q[c];
#endif
        const uvec4 t = uvec4(u << 15, u << 7, u >> 1, u >> 9);  // byte j at bits 15..22
#if defined(WTYPE_Q8_0)
        s += dot(uintBitsToFloat((t & 0x007F8000u) | 0x3F800000u), xs[8 * b + c]);
#else
        s += dot(uintBitsToFloat((t & 0x00078000u) | 0x3F800000u), xs[8 * b + c]) +
             dot(uintBitsToFloat((t & 0x00780000u) | 0x3F800000u), xs[8 * b + 4 + c]);
#endif
    }
    const vec2 head = unpackHalf2x16(w.head), bias_sum = xb[b];
#if defined(WTYPE_Q4_1)
    return head.x * (s - bias_sum.x) + head.y * bias_sum.y;  // d n + m
#else
    return head.x * (s - bias_sum.x);
#endif
}

#endif

// Stages one vec4 of formed x at index i of the staging arrays (a block's 8 vec4s side by
// side): rounded per block of 32 (X_INT8) or scaled, its block's sums added up by shuffles
// among the 8 neighbouring invocations that stage that block (all of them call this).
void stage_x(uint i, vec4 f) {
#ifdef X_INT8
    // Rounded per block of 32 with the step max|x| / 127 or / 32767, half to even (int8:
    // ggml's q8_1; tests/python/int8_x.py emulates both).
    float amax = max(max(abs(f.x), abs(f.y)), max(abs(f.z), abs(f.w)));
    [[unroll]] for (uint m = 1; m < 8; m *= 2) amax = max(amax, subgroupShuffleXor(amax, m));
    const float top = X16 ? 32767.0 : 127.0;
    const ivec4 q = ivec4(roundEven(f * (amax > 0.0 ? top / amax : 0.0)));
    const ivec4 qh = X16 ? q >> 8 : q;  // arithmetic shift: the signed high byte
    xq[i / 4][i % 4] = uint(qh.x & 0xFF) | uint(qh.y & 0xFF) << 8 | uint(qh.z & 0xFF) << 16 | uint(qh.w & 0xFF) << 24;
    if (X16) xr[i / 4][i % 4] = uint(q.x & 0xFF) | uint(q.y & 0xFF) << 8 | uint(q.z & 0xFF) << 16 | uint(q.w & 0xFF) << 24;
    int sum = q.x + q.y + q.z + q.w;
    [[unroll]] for (uint m = 1; m < 8; m *= 2) sum += subgroupShuffleXor(sum, m);
    if (i % 8 == 0) xb[i / 8] = vec2(amax / top, amax / top * float(sum));
#else
    const vec4 staged = f * x_scale(i % 8);
    xs[i] = staged;
    vec2 sums = vec2(dot(staged, vec4(1.0)), dot(f, vec4(1.0)));  // {bias, sum of x}
    [[unroll]] for (uint m = 1; m < 8; m *= 2) sums += subgroupShuffleXor(sums, m);
    if (i % 8 == 0) xb[i / 8] = vec2(sums.x + CODE_OFFSET * sums.y, sums.y);
#endif
}
