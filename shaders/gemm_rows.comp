#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef X_INT8
#extension GL_EXT_spirv_intrinsics : require  // integer dot products: int_dot.glsl
#endif
// gemm_rows_<wtype>_t32v: Y[m, n] = X[m, :] · W[n, :] for tile-major Q8_0, Q4_0 and Q4_1
// matrices and few rows of X: a batched decode step's, or a short prompt's. It is the tile GEMV
// (gemv_tiles.comp) with XROWS rows of x: a workgroup owns a tile of 32 features and XROWS rows,
// stages those rows' x per slice of blocks, and multiplies each block of weights it loads by
// every staged row, so that a step reads each weight once per XROWS rows instead of once per
// row, at the GEMV's rate. The workgroups of one tile run side by side (row groups along x,
// tiles along y), so a step of more than XROWS rows reads each tile while it is in cache.
//
// Rows past min(p.m, step.n_tokens) are neither computed nor written, and the dispatch runs
// only for steps inside its row window (p.min_rows, p.max_rows), as a GEMM's does.
#include "common.glsl"
#ifdef X_INT8
#include "int_dot.glsl"
#endif

layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; };       // [m, ldx / 4]
layout(std430, binding = 1) readonly buffer Xh { f16vec4 xh4[]; };  // X_HALF: [m, ldx / 4] halves
layout(std430, binding = 2) buffer Y { float y[]; };                 // [m, ldy]
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { GemmParams p; };
#define W_BINDING 0
#define W_TILES
#include "weights.glsl"
layout(std430, binding = 0) readonly buffer Wv { uvec4 wv[]; };  // the codes as 16-byte chunks

layout(local_size_x_id = 0) in;                          // 32 * SPLIT invocations
layout(constant_id = 1) const uint UNITS = 2;            // blocks each invocation loads before multiplying
layout(constant_id = 2) const uint SLICE_BLOCKS = 32;    // blocks of x staged per pass, per row
layout(constant_id = 3) const uint X_BITS = 16;          // X_INT8 only: x rounded to 8 or 16 bits
layout(constant_id = 4) const uint XROWS = 16;           // rows of x per workgroup, at most MAX_XROWS
layout(constant_id = 5) const bool X_HALF = false;       // X holds halves
const bool X16 = X_BITS == 16;
#define MAX_UNITS 8
#define MAX_SPLIT 32
#define MAX_XROWS 16
const uint SPLIT = gl_WorkGroupSize.x / 32;

// The staged rows side by side: row j's block b at j * SLICE_BLOCKS + b.
#ifdef X_INT8
shared uvec4 xq[XROWS * SLICE_BLOCKS * 2];
shared uvec4 xr[XROWS * SLICE_BLOCKS * 2];
shared vec2 xb[XROWS * SLICE_BLOCKS];
#else
shared vec4 xs[XROWS * SLICE_BLOCKS * 8];
shared vec2 xb[XROWS * SLICE_BLOCKS];
#endif
shared float partial[MAX_SPLIT][32];

#include "tile_blocks.glsl"

Block load_tile_block(uint column, uint r) {
    Block w;
    LOAD_BLOCK(wv, wh)
    return w;
}

vec4 x_at(uint row, uint i) {
    const uint at = row * (p.ldx / 4) + i;
    return X_HALF ? vec4(xh4[at]) : x4[at];
}

void main() {
    const uint m_end = min(p.m, step.n_tokens);
    const uint m0 = gl_WorkGroupID.x * XROWS, tile = gl_WorkGroupID.y;
    if (m0 >= m_end || !AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) return;  // uniform
    const uint rows = min(XROWS, m_end - m0);
    const uint tid = gl_LocalInvocationID.x, r = tid % 32, split = tid / 32, blocks = p.k / 32;
    float acc[MAX_XROWS];
    // Loops over rows run to MAX_XROWS, unrolled here, and test j < XROWS, which specialization
    // makes a constant: what remains is straight code on XROWS accumulators.
    [[unroll]] for (uint j = 0; j < MAX_XROWS; ++j) acc[j] = 0.0;
    for (uint first = 0; first < blocks; first += SLICE_BLOCKS) {
        const uint n = min(SLICE_BLOCKS, blocks - first);
        // As in the GEMV: the first blocks load before x is staged; blocks past the slice load
        // its last one again.
        Block w[MAX_UNITS];
        [[unroll]] for (uint u = 0; u < UNITS; ++u)
            w[u] = load_tile_block(w_tile_column(tile * 32, first + min(split + u * SPLIT, n - 1), p.k), r);
        barrier();  // every invocation is done with the previous slice
        // All XROWS rows are staged; a short last group stages its last row again in their place.
        for (uint i = tid; i < XROWS * n * 8; i += gl_WorkGroupSize.x) {
            const uint j = i / (n * 8), e = i - j * (n * 8);
            stage_x(j * SLICE_BLOCKS * 8 + e, x_at(m0 + min(j, rows - 1), first * 8 + e));
        }
        barrier();
        for (uint b0 = split; b0 < n; b0 += SPLIT * UNITS) {
            [[unroll]] for (uint u = 0; u < UNITS; ++u) {
                const uint b = b0 + u * SPLIT;
                if (b < n)
                    [[unroll]] for (uint j = 0; j < MAX_XROWS; ++j)
                        if (j < XROWS) acc[j] += block_dot(w[u], j * SLICE_BLOCKS + b);
            }
            const uint next = b0 + SPLIT * UNITS;
            if (next < n)
                [[unroll]] for (uint u = 0; u < UNITS; ++u)
                    w[u] = load_tile_block(w_tile_column(tile * 32, first + min(next + u * SPLIT, n - 1), p.k), r);
        }
    }
    // Each row's partial sums meet in the first 32 invocations, in the order of the splits.
    const uint feature = tile * 32 + tid;
    [[unroll]] for (uint j = 0; j < MAX_XROWS; ++j) {
        if (j < XROWS && j < rows) {
            partial[split][r] = acc[j];
            barrier();
            if (tid < 32 && feature < p.n) {
                float total = 0.0;
                for (uint s = 0; s < SPLIT; ++s) total += partial[s][tid];
                const uint at = (m0 + j) * p.ldy + feature;
                y[at] = p.accumulate != 0 ? y[at] + total : total;
            }
            barrier();
        }
    }
}
