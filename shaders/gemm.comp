#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// gemm_<wtype>: Y[m, n] = X[m, :] · W[n, :] for a prefill chunk on fp32 FMAs (gemm_cm.comp is
// the cooperative-matrix form, for devices that have them).
//
// Each workgroup computes a BM x BN tile of Y. Per step of BK along k it stages the X tile and
// the W tile (dequantized from any supported weight type, 8 weights per load) in shared memory,
// loads the next step's tiles into registers, then multiplies: each of 256 invocations
// accumulates a 4 x 4 sub-tile (64 x 64 tiles, BK = 32).
// Rows past step.n_tokens are neither computed nor written: one recorded table serves every
// chunk length. GEMM_SHORT: 16 x 256 tiles, 16 along k a step (the W tile in 16 KB of shared
// memory), for chunks of up to AKUNU_GEMM_SHORT_ROWS tokens (gemm_tiles.h).
#include "common.glsl"
#include "gemm_tiles.h"

layout(std430, binding = 1) readonly buffer X { float x[]; };    // [m, ldx]
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(push_constant) uniform Push { GemmParams p; };
#define W_BINDING 0
#define W_TOTAL_BLOCKS (p.n * (p.k / W_BLOCK))
#include "weights.glsl"
layout(std430, binding = 2) buffer Y { float y[]; };             // [m, ldy]
layout(std430, binding = 3) readonly buffer Step { StepState step; };

#ifdef GEMM_SHORT
#define BM AKUNU_GEMM_SHORT_BM
#define BN AKUNU_GEMM_SHORT_BN
#define BK 16
#else
#define BM AKUNU_GEMM_BM
#define BN AKUNU_GEMM_BN
#define BK 32
#endif
#define THREADS 256
// Tiles transposed, [BK][BM] and [BK][BN], so that each invocation reads its 4 rows and its 4
// columns as one vec4 each.
shared vec4 xs4[BK][BM / 4];
shared vec4 ws4[BK][BN / 4];
void stage_x(uint m, uint kk, float v) { xs4[kk][m / 4][m % 4] = v; }
void stage_w(uint n, uint kk, float v) { ws4[kk][n / 4][n % 4] = v; }
layout(local_size_x = THREADS) in;

// Tile loads, 8 values per item. Item i covers row i / (BK / 8) and k offset 8 * (i % (BK / 8)):
// neighbouring lanes read neighbouring bytes of one row (of one quantized block), which
// measured faster than spreading a subgroup over 32 rows for conflict-free stores.
// A short tile has fewer X items than invocations: X_ITEMS rounds up, and items past
// X_TOTAL are skipped.
#define X_TOTAL (BM * (BK / 8))
#define X_ITEMS ((X_TOTAL + THREADS - 1) / THREADS)
#define W_ITEMS (BN * (BK / 8) / THREADS)
float xr[X_ITEMS][8], wr[W_ITEMS][8];

// Reads X[m0 : m0 + BM, k0 : k0 + BK] and W[n0 : n0 + BN, k0 : k0 + BK] into registers, zero
// outside the matrices; issued before the current tile's products, so the loads are in flight
// while they run.
void load_tiles(uint m0, uint n0, uint k0, uint m_end) {
    const bool x_vec = (p.ldx & 3u) == 0u;
    [[unroll]] for (uint t = 0; t < X_ITEMS; ++t) {
        const uint item = gl_LocalInvocationID.x + THREADS * t;
        if (item >= X_TOTAL) break;  // folds away where X_TOTAL is a multiple of THREADS
        const uint m = m0 + item / (BK / 8), k = k0 + 8 * (item % (BK / 8));
        if (m < m_end && x_vec && k + 8 <= p.k) {
            const vec4 a = x4[(m * p.ldx + k) / 4], b = x4[(m * p.ldx + k) / 4 + 1];
            xr[t] = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
        } else {
            [[unroll]] for (uint j = 0; j < 8; ++j) xr[t][j] = m < m_end && k + j < p.k ? x[m * p.ldx + k + j] : 0.0;
        }
    }
    [[unroll]] for (uint t = 0; t < W_ITEMS; ++t) {
        const uint item = gl_LocalInvocationID.x + THREADS * t;
        const uint n = n0 + item / (BK / 8), k = k0 + 8 * (item % (BK / 8));
        if (n < p.n && k < p.k) {
            w_load8(n, k, p.k, wr[t]);
        } else {
            [[unroll]] for (uint j = 0; j < 8; ++j) wr[t][j] = 0.0;
        }
    }
}

void store_tiles() {
    [[unroll]] for (uint t = 0; t < X_ITEMS; ++t) {
        const uint item = gl_LocalInvocationID.x + THREADS * t;
        if (item >= X_TOTAL) break;
        [[unroll]] for (uint j = 0; j < 8; ++j) stage_x(item / (BK / 8), 8 * (item % (BK / 8)) + j, xr[t][j]);
    }
    [[unroll]] for (uint t = 0; t < W_ITEMS; ++t) {
        const uint item = gl_LocalInvocationID.x + THREADS * t;
        [[unroll]] for (uint j = 0; j < 8; ++j) stage_w(item / (BK / 8), 8 * (item % (BK / 8)) + j, wr[t][j]);
    }
}

void store(uint m, uint n, float v) {
    const uint at = m * p.ldy + n;
    y[at] = p.accumulate != 0 ? y[at] + v : v;
}

void main() {
    const uint m_end = min(p.m, step.n_tokens);
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    if (m0 >= m_end || !AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x;

    const uint tm = tid / (BN / 4), tn = tid % (BN / 4);  // this invocation's 4 rows and 4 columns
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));

    load_tiles(m0, n0, 0, m_end);
    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        store_tiles();
        barrier();
        if (k0 + BK < p.k) load_tiles(m0, n0, k0 + BK, m_end);
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
            const vec4 a = xs4[kk][tm], w = ws4[kk][tn];
            acc[0] += a.x * w;
            acc[1] += a.y * w;
            acc[2] += a.z * w;
            acc[3] += a.w * w;
        }
        barrier();
    }

    for (uint i = 0; i < 4; ++i) {
        const uint m = m0 + tm * 4 + i;
        if (m >= m_end) break;
        for (uint j = 0; j < 4; ++j) {
            const uint n = n0 + tn * 4 + j;
            if (n < p.n) store(m, n, acc[i][j]);
        }
    }
}
