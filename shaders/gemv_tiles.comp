#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef X_INT8
#extension GL_EXT_spirv_intrinsics : require  // integer dot products: int_dot.glsl
#endif
// gemv_<wtype>_t32v: y[r] = dot(W[r, :], x) for tile-major Q8_0, Q4_0 and Q4_1 matrices
// (cpu/tiles.h's *_T32V layout), fp32 accumulation. One workgroup per tile of 32 rows: invocation i owns row
// i % 32 and every SPLIT-th block column of it, SPLIT = invocations / 32. With p.rows1 or
// p.rows2 set, one dispatch also multiplies the same x by a second and third matrix (bindings
// 4 and 5) into their own y (bindings 6 and 7): Q, K and V, or gate and up. Their tiles follow
// the first's in the grid. That is one or two dependent dispatches fewer, and their launch and
// drain, where a decode layer has only a few microseconds of work per GEMV. With
// p.rope_head_dim set, the Q/K/V dispatch also does rope_kv's work for the step's token: the
// rows of a RoPE pair (2 f, 2 f + 1) are neighbours in a tile, so their invocations swap totals
// by a shuffle and rotate them, and K and V rows go to the cache as they are written.
//
// Why tiles: in the file's layout a block is 18, 20 or 34 bytes, only 2-byte aligned, so a
// GEMV reads it as 16-bit words and pairs each lane with other x values. In a tile column the
// 32 rows' codes are contiguous 16-byte chunks, so each load of a row's chunk is one coalesced
// 512-byte read across the 32 rows, and the 32 rows meet the same x: the workgroup
// forms x (x_op: the norm's weight, or the gated activation) once per slice into shared memory
// for all 32 rows, and every invocation then reads it by broadcast.
//
// Codes become floats through their bits (weights.glsl): a code byte at bits 15..22 ORed into
// 1.0f reads 1 + c / 256, a nibble at 15..18 1 + n / 256 and one at 19..22 1 + n / 16. The
// staged x is scaled to match (by 256 under bytes and low nibbles, 16 under high nibbles), and
// each block's bias (the sum of its staged x, which the 1s add, plus the format's offset) is
// taken out once per block: xb[b] = {bias, sum of x}.
//
// gemv_dot_<wtype>_t32v (X_INT8): the workgroup rounds the formed x per block of 32 instead, and
// a chunk costs one or two 4-way integer dot products per byte of x's codes. X_BITS 8
// (AKUNU_INT8=1): int8, step max|x| / 127, half to even, as ggml's q8_1; a quarter of the float
// path's instructions per weight. X_BITS 16 (the engine's default): int16, step max|x| / 32767,
// as the CPU backend's GEMV; each code is held as its signed high byte (xq) and unsigned low
// byte (xr), sum = 256 sum(hi w) + sum(lo w), exact in int32, for twice the dot products.
#include "common.glsl"
#include "activation.glsl"
#ifdef X_INT8
#include "int_dot.glsl"
#endif

layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; };  // [k/4]
layout(std430, binding = 3) readonly buffer Gv { vec4 g4[]; };  // [k/4] the norm weight or up (x_op)
// x and g as a HANDOFF_WAIT dispatch reads them: written by workgroups of the dispatch before,
// which may still run, so past the compute unit's own cache.
layout(std430, binding = 1) coherent readonly buffer Xc { vec4 x4_coherent[]; };
layout(std430, binding = 3) coherent readonly buffer Gc { vec4 g4_coherent[]; };
layout(std430, binding = 2) buffer Y { float y[]; };            // [rows]
layout(std430, binding = 6) buffer Y1 { float y1[]; };          // [rows1]
layout(std430, binding = 7) buffer Y2 { float y2[]; };          // [rows2]
layout(push_constant) uniform Push { GemvParams p; };
#include "rope_fold.glsl"
#define HANDOFF_BINDING 13
#include "handoff.glsl"
#define W_BINDING 0
#define W_TILES
#include "weights.glsl"
layout(std430, binding = 0) readonly buffer Wv { uvec4 wv[]; };  // the codes as 16-byte chunks
// The second and third matrix: where there are fewer, the launcher binds the first again.
layout(std430, binding = 4) readonly buffer W1v { uvec4 w1v[]; };
layout(std430, binding = 4) readonly buffer W1h { uint16_t w1h[]; };
layout(std430, binding = 5) readonly buffer W2v { uvec4 w2v[]; };
layout(std430, binding = 5) readonly buffer W2h { uint16_t w2h[]; };

layout(local_size_x_id = 0) in;                       // 32 * SPLIT invocations
layout(constant_id = 1) const uint UNITS = 4;         // blocks each invocation loads before multiplying
layout(constant_id = 2) const uint X_OP = AKUNU_GEMV_X;
layout(constant_id = 3) const uint SLICE_BLOCKS = 128;  // blocks of x staged per pass
// X_INT8 only: the bits x is rounded to, 8 or 16 (kernels::XRounding).
layout(constant_id = 4) const uint X_BITS = 8;
const bool X16 = X_BITS == 16;
// The hand-off with the GEMV before or after this one (kernels::GemvHandoff), bits: 1 signals
// when y is written, 2 waits for the previous dispatch's signals before reading x, 4 zeroes
// slots that an earlier layer used (p.handoff_clear).
layout(constant_id = 5) const uint HANDOFF = 0;
const bool HANDOFF_SIGNAL = (HANDOFF & 1u) != 0, HANDOFF_WAIT = (HANDOFF & 2u) != 0;
const bool HANDOFF_CLEAR = (HANDOFF & 4u) != 0;
#define MAX_UNITS 8
#define MAX_SPLIT 32
#define MAX_SUBGROUPS 128
const uint SPLIT = gl_WorkGroupSize.x / 32;

#ifdef X_INT8
shared uvec4 xq[SLICE_BLOCKS * 2];  // the slice's x, formed and rounded, 4 codes (X16: high bytes) to a word
shared uvec4 xr[SLICE_BLOCKS * 2];  // X16: the codes' low bytes
shared vec2 xb[SLICE_BLOCKS];      // per block: {step, step * sum of the rounded x}
#else
shared vec4 xs[SLICE_BLOCKS * 8];  // the slice's x, formed and scaled
shared vec2 xb[SLICE_BLOCKS];      // per block: {bias, sum of x}
#endif
shared float partial[MAX_SPLIT][32];
shared float sum_sq_partial[MAX_SUBGROUPS];

#include "tile_blocks.glsl"

Block load_block(uint part, uint column, uint r) {
    Block w;
    if (part == 0)
        LOAD_BLOCK(wv, wh)
    else if (part == 1)
        LOAD_BLOCK(w1v, w1h)
    else
        LOAD_BLOCK(w2v, w2h)
    return w;
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint r = tid % 32, split = tid / 32, blocks = p.k / 32;
    // Which matrix this workgroup's tile belongs to, and its rows.
    uint tile = linear_group_id(), part = 0, part_rows = p.rows;
    const uint tiles0 = (p.rows + 31) / 32, tiles1 = (p.rows1 + 31) / 32;
    if (tile >= tiles0) {
        tile -= tiles0, part = 1, part_rows = p.rows1;
        if (tile >= tiles1) tile -= tiles1, part = 2, part_rows = p.rows2;
    }
    float acc = 0.0, sum_sq = 0.0;
    for (uint first = 0; first < blocks; first += SLICE_BLOCKS) {
        const uint n = min(SLICE_BLOCKS, blocks - first);
        // This invocation's first blocks load before x is staged, so that their latency overlaps
        // that work. Blocks past the slice load its last one again (no branch around a load).
        Block w[MAX_UNITS];
        [[unroll]] for (uint u = 0; u < UNITS; ++u)
            w[u] = load_block(part, w_tile_column(tile * 32, first + min(split + u * SPLIT, n - 1), p.k), r);
        // The first blocks are in flight while this workgroup waits for x, if it waits.
        if (HANDOFF_WAIT && first == 0) handoff_await(p.handoff_wait, p.handoff_wait_count);
        barrier();  // every invocation is done with the previous slice (and x is written)
        // Each 8 neighbouring invocations stage one block's x and add up its sums by shuffles.
        for (uint i = tid; i < n * 8; i += gl_WorkGroupSize.x) {
            const uint at = first * 8 + i;
            const vec4 xv = HANDOFF_WAIT ? x4_coherent[at] : x4[at];
            if (X_OP == AKUNU_GEMV_RMSNORM) sum_sq += dot(xv, xv);
            // The norm weight is never written: only up (the gated op's g) comes from the GEMV before.
            const vec4 g = HANDOFF_WAIT && X_OP != AKUNU_GEMV_RMSNORM ? g4_coherent[at] : g4[at];
            const vec4 f = X_OP == AKUNU_GEMV_X ? xv : gemv_x_op(X_OP, xv, g, p.weight_offset);
            stage_x(i, f);
        }
        barrier();
        // The next blocks load after these are multiplied: loading them before (twice the
        // registers) measured slower with fp32 x and with int16 x (bench/NOTES.md).
        for (uint b0 = split; b0 < n; b0 += SPLIT * UNITS) {
            [[unroll]] for (uint u = 0; u < UNITS; ++u)
                if (b0 + u * SPLIT < n) acc += block_dot(w[u], b0 + u * SPLIT);
            const uint next = b0 + SPLIT * UNITS;
            if (next < n)
                [[unroll]] for (uint u = 0; u < UNITS; ++u)
                    w[u] = load_block(part, w_tile_column(tile * 32, first + min(next + u * SPLIT, n - 1), p.k), r);
        }
    }

    partial[split][r] = acc;
    if (X_OP == AKUNU_GEMV_RMSNORM) {
        sum_sq = subgroupAdd(sum_sq);
        if (subgroupElect()) sum_sq_partial[gl_SubgroupID] = sum_sq;
    }
    barrier();
    const uint row = tile * 32 + tid;
    if (tid < 32) {
        float total = 0.0;
        for (uint s = 0; s < SPLIT; ++s) total += partial[s][tid];
        if (X_OP == AKUNU_GEMV_RMSNORM) {
            float ss = 0.0;
            for (uint s = 0; s < gl_NumSubgroups; ++s) ss += sum_sq_partial[s];
            total *= inversesqrt(ss / float(p.k) + p.eps);
        }
        // A RoPE pair's rows are neighbouring invocations of this tile (rope_fold.glsl).
        const float other = rope_partner(total);
        if (row < part_rows) {
            total = rope_fold(part, row, total, other);
            if (part == 0)
                y[row] = p.accumulate != 0 ? y[row] + total : total;
            else if (part == 1)
                y1[row] = p.accumulate != 0 ? y1[row] + total : total;
            else
                y2[row] = p.accumulate != 0 ? y2[row] + total : total;
        }
    }
    if (HANDOFF_SIGNAL) handoff_count_in(p.handoff_signal);
    // Slots whose waits all ended before this dispatch (a barrier lies between): zeroed for the
    // next step by one invocation.
    if (HANDOFF_CLEAR && tid == 0 && linear_group_id() == 0)
        for (uint i = 0; i < p.handoff_clear_count; ++i) handoff[p.handoff_clear + i] = 0;
}
