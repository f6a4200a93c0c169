// Weight access for every supported weight type, selected by one define per variant
// (WTYPE_F32, WTYPE_F16, WTYPE_BF16, WTYPE_Q8_0, WTYPE_Q4_0, WTYPE_Q4_1, WTYPE_Q5_0, WTYPE_Q5_1,
// WTYPE_Q4_K, WTYPE_Q5_K, WTYPE_Q6_K, and WTYPE_MLX with MLX_BITS and W_BLOCK). The includer
// sets W_BINDING, and for MLX weights W_TOTAL_BLOCKS. Float types expose w_load1/w_load4; block
// formats (ggml layouts, W_BLOCK elements per block) expose w_block8(), which decodes 8 elements
// of a block, and, where the includer defines W_X4, w_lane_dot() (k-quants, Q5_0/Q5_1, MLX) or
// w_lane_x(), w_lane_load() and w_lane_dot_x() (Q8_0/Q4_0/Q4_1) for the GEMV. Every type exposes
// w_load8() for GEMM tiles and embedding rows. With W_TILES, Q8_0/Q4_0/Q4_1 matrices are
// tile-major (cpu/tiles.h, what DeviceProfile::weight_tiles uploads): w_load8() and w_raw8()
// read that layout, and gemv_tiles.comp uses w_tile_column() and friends directly.
#ifndef AKUNU_WEIGHTS_GLSL
#define AKUNU_WEIGHTS_GLSL

#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

#if defined(WTYPE_F32)
#define W_BLOCK 1
layout(std430, binding = W_BINDING) readonly buffer Wv { vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { float w1[]; };
float w_load1(uint i) { return w1[i]; }
vec4 w_load4(uint i) { return w4[i]; }
#elif defined(WTYPE_F16)
#define W_BLOCK 1
layout(std430, binding = W_BINDING) readonly buffer Wv { f16vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { float16_t w1[]; };
float w_load1(uint i) { return float(w1[i]); }
vec4 w_load4(uint i) { return vec4(w4[i]); }
#elif defined(WTYPE_BF16)
#define W_BLOCK 1
// bfloat16 is the top half of a float32.
layout(std430, binding = W_BINDING) readonly buffer Wv { u16vec4 w4[]; };
layout(std430, binding = W_BINDING) readonly buffer Ws { uint16_t w1[]; };
float w_load1(uint i) { return uintBitsToFloat(uint(w1[i]) << 16); }
vec4 w_load4(uint i) { return uintBitsToFloat(uvec4(w4[i]) << 16); }
#endif

#if W_BLOCK == 1 && defined(W_PARTS)
// W_PARTS matrices of the same float type: the second and third at bindings 4 and 5, which
// gemv_core.glsl's fused GEMVs (gate and up; Q, K and V) read with w_load4_1() and w_load4_2().
#if defined(WTYPE_F32)
#define W_PART_VEC4 vec4
#define W_PART_FLOAT4(v) (v)
#elif defined(WTYPE_F16)
#define W_PART_VEC4 f16vec4
#define W_PART_FLOAT4(v) vec4(v)
#else
#define W_PART_VEC4 u16vec4
#define W_PART_FLOAT4(v) uintBitsToFloat(uvec4(v) << 16)
#endif
layout(std430, binding = 4) readonly buffer Wv1 { W_PART_VEC4 w4_1[]; };
vec4 w_load4_1(uint i) { return W_PART_FLOAT4(w4_1[i]); }
#if W_PARTS > 2
layout(std430, binding = 5) readonly buffer Wv2 { W_PART_VEC4 w4_2[]; };
vec4 w_load4_2(uint i) { return W_PART_FLOAT4(w4_2[i]); }
#endif
#endif

#if W_BLOCK == 1
// Eight weights W[row, k0 : k0 + 8] of a [rows, K] matrix, zero past K: a GEMM tile load.
void w_load8(uint row, uint k0, uint K, out float v[8]) {
    if ((K & 3u) == 0u && k0 + 8 <= K) {
        const vec4 a = w_load4((row * K + k0) >> 2), b = w_load4(((row * K + k0) >> 2) + 1);
        v = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
    } else {
        for (uint j = 0; j < 8; ++j) v[j] = k0 + j < K ? w_load1(row * K + k0 + j) : 0.0;
    }
}
#else
// Block formats are read bytewise or as 16-bit words: the 32-element blocks are 18, 20 or 34
// bytes (only 2-byte aligned), as is Q6_K's 210-byte block.
layout(std430, binding = W_BINDING) readonly buffer Wb { uint8_t wb[]; };
layout(std430, binding = W_BINDING) readonly buffer Wh { uint16_t wh[]; };

float w_half(uint byte) { return unpackHalf2x16(uint(wb[byte]) | (uint(wb[byte + 1]) << 8)).x; }
float w_half_word(uint word) { return unpackHalf2x16(uint(wh[word])).x; }

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
#include "kquants.glsl"
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
#include "q5.glsl"
#elif defined(WTYPE_MLX)
#include "mlx_affine.glsl"
#else
#define W_BLOCK 32
#if defined(WTYPE_Q8_0)
#define W_BLOCK_BYTES 34  // block_q8_0 {half d; int8 qs[32]}
#elif defined(WTYPE_Q4_0)
#define W_BLOCK_BYTES 18  // block_q4_0 {half d; u8 qs[16]}: low nibbles are elements 0..15, high nibbles 16..31
#elif defined(WTYPE_Q4_1)
#define W_BLOCK_BYTES 20  // block_q4_1 {half d; half m; u8 qs[16]}
#else
#error "no WTYPE_* defined"
#endif
#if defined(WTYPE_Q4_1)
#define W_HEAD_FIELDS 2  // f16 d, m
#else
#define W_HEAD_FIELDS 1  // f16 d
#endif

#ifdef W_TILES
// Tile-major blocks, Vulkan devices' *_T32V layout (cpu/tiles.h): block column b of rows
// 32 t .. 32 t + 31 is tile column t * (K / 32) + b, 32 * W_BLOCK_BYTES bytes: the head fields
// of its 32 rows (64 bytes each), then the codes in 16-byte chunks, chunk v (Q8_0: 0 or 1) of
// row r at 16-byte vector 4 * W_HEAD_FIELDS + 32 v + r of the column. Every access is a whole
// 16-bit word, 32-bit word or 16-byte vector, and 32 rows' chunks are contiguous.
layout(std430, binding = W_BINDING) readonly buffer Ww { uint ww[]; };
// The first word of the tile column that holds block b of `row` in a matrix of rows of K.
uint w_tile_column(uint row, uint b, uint K) { return ((row / 32) * (K / 32) + b) * (W_BLOCK_BYTES * 8); }
// Where head field f (0: d, 1: Q4_1's m) of row r (0..31) in a column lies, in 16-bit words,
// code word c (bytes 4 c .. 4 c + 3 of the block's codes) in 32-bit words, and 16-byte chunk v
// in 16-byte vectors (a column starts on a multiple of 16 bytes: 32 * W_BLOCK_BYTES is).
uint w_tile_head_at(uint column, uint r, uint f) { return 2 * column + 32 * f + r; }
uint w_tile_chunk_at(uint column, uint r, uint c) {
    return column + 16 * W_HEAD_FIELDS + 128 * (c / 4) + 4 * r + c % 4;
}
uint w_tile_vec_at(uint column, uint r, uint v) { return column / 4 + 4 * W_HEAD_FIELDS + 32 * v + r; }
// The head field as half bits, and the chunk.
uint w_tile_head(uint column, uint r, uint f) { return uint(wh[w_tile_head_at(column, r, f)]); }
uint w_tile_chunk(uint column, uint r, uint c) { return ww[w_tile_chunk_at(column, r, c)]; }
#endif

// Elements 8 * part .. 8 * part + 7 of a block: what one invocation of the GEMM or the
// embedding reads at a time.
void w_block8(uint block, uint part, out float v[8]) {
    const uint b = block * W_BLOCK_BYTES;
#if defined(WTYPE_Q8_0)
    const float d = w_half(b);
    for (uint j = 0; j < 8; ++j) v[j] = d * float(int8_t(wb[b + 2 + part * 8 + j]));
#else
#if defined(WTYPE_Q4_0)
    const float d = w_half(b), m = -8.0 * d;
    const uint qs = b + 2;
#else
    const float d = w_half(b), m = w_half(b + 2);
    const uint qs = b + 4;
#endif
    // Elements 0..15 are the low nibbles of bytes 0..15, elements 16..31 the high nibbles.
    const uint shift = part >= 2 ? 4 : 0, first = (part & 1u) * 8;
    for (uint j = 0; j < 8; ++j) v[j] = d * float((uint(wb[qs + first + j]) >> shift) & 15u) + m;
#endif
}

// Block dot products split over lanes, so that neighbouring invocations read neighbouring
// bytes of a block and neighbouring vec4s of x (coalesced loads). W_LANES lanes share a block.
// The includer defines W_X4(i) as its x viewed as vec4s. For these 32-element blocks a lane's
// x is formed once and serves every row of the workgroup: w_lane_x(xblock, lane) returns it,
// w_lane_load(block, lane) reads the lane's codes of a block, and w_lane_dot_x(codes, x) is
// that lane's share of dot(block, x[xblock * 32 : +32]).
//
// Codes become floats through their bits, not by int-to-float conversions (a quarter-rate
// instruction on NVIDIA): a code byte shifted to bits 15..22 and ORed into 1.0f reads as
// 1 + c / 256 (a nibble at 15..18 as 1 + n / 256, one at 19..22 as 1 + n / 16), one shift per
// byte and one logic op per code. x is scaled to match (by 256 or 16), and a bias per lane
// takes the 1s back out with the format's offset: the sums run about 2^4 above the result, a
// few ulps of fp32.
#ifdef W_X4
#define W_LANE_X
struct WLaneX {
    vec4 a, b;   // x under the low nibbles (Q8_0: the bytes) times 256, under the high ones times 16
    float bias;  // what the 1s of the codes' floats and the format's offset add, with its sign flipped
    float sum;   // the sum of the x values (Q4_1's minimum multiplies it)
};
// What a lane reads of a block: its 4 code bytes and the block's head (d, and m for Q4_1, as
// half bits), loaded by w_lane_load() before any product so that many loads are in flight.
struct WLaneW {
    uint codes;
    uint head;
};
#if defined(WTYPE_Q8_0)
#define W_LANES 8
// Lane l holds qs bytes 4l..4l+3 = elements 4l..4l+3.
WLaneX w_lane_x(uint xblock, uint lane) {
    const vec4 x = W_X4(xblock * 8 + lane);
    const float sum = dot(x, vec4(1.0));
    // Signed bytes q read as c = q + 128: sum(q x) = sum(c x) - 128 sum(x) = dot(1 + c/256, 256 x) - 384 sum(x).
    return WLaneX(256.0 * x, vec4(0.0), -384.0 * sum, sum);
}
WLaneW w_lane_load(uint block, uint lane) {
    const uint w = block * 17;
    return WLaneW(uint(wh[w + 1 + 2 * lane]) | (uint(wh[w + 2 + 2 * lane]) << 16), uint(wh[w]));
}
float w_lane_dot_x(WLaneW wl, WLaneX x) {
    const uint c = wl.codes ^ 0x80808080u;
    const uvec4 t = uvec4(c << 15, c << 7, c >> 1, c >> 9);
    return unpackHalf2x16(wl.head).x * (dot(uintBitsToFloat((t & 0x007F8000u) | 0x3F800000u), x.a) + x.bias);
}
#else
#define W_LANES 4
// Lane l holds qs bytes 4l..4l+3: low nibbles are elements 4l..4l+3, high nibbles 16+4l..
WLaneX w_lane_x(uint xblock, uint lane) {
    const vec4 xa = W_X4(xblock * 8 + lane), xb = W_X4(xblock * 8 + 4 + lane);
    const float sa = dot(xa, vec4(1.0)), sb = dot(xb, vec4(1.0));
    return WLaneX(256.0 * xa, 16.0 * xb, -(256.0 * sa + 16.0 * sb), sa + sb);
}
WLaneW w_lane_load(uint block, uint lane) {
#if defined(WTYPE_Q4_0)
    const uint w = block * 9, q0 = w + 1;
    const uint head = uint(wh[w]);
#else
    const uint w = block * 10, q0 = w + 2;
    const uint head = uint(wh[w]) | (uint(wh[w + 1]) << 16);
#endif
    return WLaneW(uint(wh[q0 + 2 * lane]) | (uint(wh[q0 + 2 * lane + 1]) << 16), head);
}
float w_lane_dot_x(WLaneW wl, WLaneX x) {
    const uint u = wl.codes;
    const uvec4 t = uvec4(u << 15, u << 7, u >> 1, u >> 9);  // byte j at bits 15..22
    const float s = dot(uintBitsToFloat((t & 0x00078000u) | 0x3F800000u), x.a) +
                    dot(uintBitsToFloat((t & 0x00780000u) | 0x3F800000u), x.b) + x.bias;  // sum(code x)
    const vec2 head = unpackHalf2x16(wl.head);
#if defined(WTYPE_Q4_0)
    return head.x * (s - 8.0 * x.sum);
#else
    return head.x * s + head.y * x.sum;
#endif
}
#endif  // WTYPE_Q8_0
#endif  // W_X4
#endif  // k-quants or 32-element blocks

// Eight weights W[row, k0 : k0 + 8] of a [rows, K] matrix (k0 a multiple of 8).
#if defined(W_TILES)
// Part p of a block is chunks 2 p and 2 p + 1 (Q8_0), or the low (p < 2) or high nibbles of
// chunks 2 (p & 1) and 2 (p & 1) + 1 (the 4-bit formats).
void w_load8(uint row, uint k0, uint K, out float v[8]) {
    const uint column = w_tile_column(row, k0 / 32, K), r = row % 32, part = (k0 % 32) / 8;
    const float d = unpackHalf2x16(w_tile_head(column, r, 0)).x;
#if defined(WTYPE_Q8_0)
    const uint a = w_tile_chunk(column, r, 2 * part), b = w_tile_chunk(column, r, 2 * part + 1);
    for (uint j = 0; j < 8; ++j) v[j] = d * float(int((j < 4 ? a : b) << (24 - 8 * (j % 4))) >> 24);
#else
#if defined(WTYPE_Q4_0)
    const float m = -8.0 * d;
#else
    const float m = unpackHalf2x16(w_tile_head(column, r, 1)).x;
#endif
    const uint c = 2 * (part & 1u), shift = part >= 2 ? 4 : 0;
    const uint a = w_tile_chunk(column, r, c), b = w_tile_chunk(column, r, c + 1);
    for (uint j = 0; j < 8; ++j) v[j] = d * float(((j < 4 ? a : b) >> (8 * (j % 4) + shift)) & 15u) + m;
#endif
}
#else
void w_load8(uint row, uint k0, uint K, out float v[8]) {
    w_block8(row * (K / W_BLOCK) + k0 / W_BLOCK, (k0 % W_BLOCK) / 8, v);
}
#endif
#endif  // block formats

#ifdef W_LOAD8_HALF
// The cooperative-matrix GEMM's tile loads of eight weights W[row, k0 : k0 + 8] (k0 a multiple
// of 8), in two parts: w_raw8() issues the loads with no branch, so that all of a tile's loads
// are in flight at once (a load whose value is converted inside a branch is waited for before
// the next one issues), and w_half8() turns what they read into packed halves, later. The f16,
// Q8_0, Q4_0 and Q4_1 loaders read only whole words; other types decode in w_raw8().
uvec4 w_pack8(vec4 a, vec4 b) {
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
uvec4 w_pack8(float v[8]) { return w_pack8(vec4(v[0], v[1], v[2], v[3]), vec4(v[4], v[5], v[6], v[7])); }
#if defined(WTYPE_F16)
layout(std430, binding = W_BINDING) readonly buffer W8h { uvec4 w8h[]; };
struct WRaw { uvec4 h; };
WRaw w_raw8(uint row, uint k0, uint K) {
    if ((K & 7u) == 0u) return WRaw(w8h[(row * K + k0) >> 3]);  // rows 16-byte aligned
    float v[8];
    w_load8(row, k0, K, v);
    return WRaw(w_pack8(v));
}
uvec4 w_half8(WRaw r, uint k0) { return r.h; }
#elif defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1)
#define W_HEAD_WORDS W_HEAD_FIELDS
// The block's head (d, and m for Q4_1) and the four 16-bit words that hold the 8 codes.
struct WRaw { uint head; uvec4 q; };
#if defined(W_TILES)
WRaw w_raw8(uint row, uint k0, uint K) {
    const uint column = w_tile_column(row, k0 / 32, K), r = row % 32, part = (k0 % 32) / 8;
#if defined(WTYPE_Q8_0)
    const uint c = 2 * part;         // bytes 8 part .. 8 part + 7
#else
    const uint c = 2 * (part & 1u);  // low or high nibbles of 8 bytes
#endif
    uint head = w_tile_head(column, r, 0);
#if W_HEAD_WORDS == 2
    head |= w_tile_head(column, r, 1) << 16;
#endif
    const uint a = w_tile_chunk(column, r, c), b = w_tile_chunk(column, r, c + 1);
    return WRaw(head, uvec4(a & 0xFFFFu, a >> 16, b & 0xFFFFu, b >> 16));
}
// A whole block row of a tile-major matrix in 16-byte loads (W_BLOCK_CHUNKS of them): four
// times fewer registers per weight in flight than four w_raw8() calls.
#if defined(WTYPE_Q8_0)
#define W_BLOCK_CHUNKS 2
#else
#define W_BLOCK_CHUNKS 1
#endif
layout(std430, binding = W_BINDING) readonly buffer WTileV { uvec4 w_tile_v[]; };
struct WBlock {
    uint head;
    uvec4 q[W_BLOCK_CHUNKS];
};
WBlock w_raw_block(uint row, uint b, uint K) {
    const uint column = w_tile_column(row, b, K), r = row % 32;
    WBlock w;
    w.head = w_tile_head(column, r, 0);
#if W_HEAD_WORDS == 2
    w.head |= w_tile_head(column, r, 1) << 16;
#endif
    [[unroll]] for (uint v = 0; v < W_BLOCK_CHUNKS; ++v) w.q[v] = w_tile_v[w_tile_vec_at(column, r, v)];
    return w;
}
#else
WRaw w_raw8(uint row, uint k0, uint K) {
    const uint w = (row * (K / 32) + k0 / 32) * (W_BLOCK_BYTES / 2), part = (k0 % 32) / 8;
#if defined(WTYPE_Q8_0)
    const uint q = w + 1 + 4 * part;                                 // bytes 8 part .. 8 part + 7
#else
    const uint q = w + W_HEAD_WORDS + 4 * (part & 1u);               // low or high nibbles of 8 bytes
#endif
    uint head = uint(wh[w]);
#if W_HEAD_WORDS == 2
    head |= uint(wh[w + 1]) << 16;
#endif
    return WRaw(head, uvec4(wh[q], wh[q + 1], wh[q + 2], wh[q + 3]));
}
#endif
// Codes become halves through their bits: 0x6400 | c is the half 1024 + c for c < 1024, so one
// OR and one subtraction per pair of codes give them exactly, and one product (a fused one for
// Q4_1's offset) rounds each weight once, as the fp32 path then rounded it to a half.
uvec4 w_half8(WRaw r, uint k0) {
    const f16vec2 d = f16vec2(unpackFloat2x16(r.head).x);
    uvec4 h;
#if defined(WTYPE_Q8_0)
    // Signed bytes, offset by 128 (the XOR), in the low and high half.
    [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint u = r.q[j] ^ 0x8080u;
        const f16vec2 c = unpackFloat2x16(0x64006400u | (u & 0xFFu) | ((u & 0xFF00u) << 8)) - f16vec2(1152.0);
        h[j] = packFloat2x16(c * d);
    }
#else
    const uint shift = (k0 % 32) >= 16 ? 4 : 0;  // high nibbles hold elements 16..31
    [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint u = r.q[j] >> shift;
        const f16vec2 n = unpackFloat2x16(0x64006400u | (u & 0xFu) | ((u & 0xF00u) << 8));
#if defined(WTYPE_Q4_0)
        h[j] = packFloat2x16((n - f16vec2(1032.0)) * d);
#else
        h[j] = packFloat2x16(fma(n - f16vec2(1024.0), d, f16vec2(unpackFloat2x16(r.head).y)));
#endif
    }
#endif
    return h;
}
#if defined(W_TILES)
// Elements 8 g .. 8 g + 7 of a block row that w_raw_block() loaded, as halves: bytes 8 g ..
// 8 g + 7 of the codes (Q8_0), or the low (g < 2) or high nibbles of bytes 8 (g % 2) .. + 7.
uvec4 w_block_half8(WBlock w, uint g) {
#if defined(WTYPE_Q8_0)
    const uvec4 c = w.q[g / 2];
#else
    const uvec4 c = w.q[0];
#endif
    const uint a = g % 2 == 0 ? c.x : c.z, b = g % 2 == 0 ? c.y : c.w;
    return w_half8(WRaw(w.head, uvec4(a & 0xFFFFu, a >> 16, b & 0xFFFFu, b >> 16)), 8 * g);
}
#endif
#else
struct WRaw { uvec4 h; };
WRaw w_raw8(uint row, uint k0, uint K) {
    float v[8];
    w_load8(row, k0, K, v);
    return WRaw(w_pack8(v));
}
uvec4 w_half8(WRaw r, uint k0) { return r.h; }
#endif
#endif  // W_LOAD8_HALF

#endif
