#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef GEMM_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
// gemm_<wtype>: Y[m, n] = X[m, :] · W[n, :] for a prefill chunk, fp32 accumulation.
//
// Each workgroup computes a 64 x 64 tile of Y. Per step of 32 along k it stages the X tile
// and the W tile (dequantized from any supported weight type) in shared memory, then each of
// the 256 invocations accumulates a 4 x 4 sub-tile. The GEMM_COOPMAT variant multiplies the
// staged tiles with NV cooperative matrices (16 x 16 x 16, f16 in, f32 out) instead.
// Rows past step.n_tokens are neither computed nor written: one recorded table serves every
// chunk length.
#include "common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };  // [m, ldx]
#define W_BINDING 0
#include "weights.glsl"
layout(std430, binding = 2) buffer Y { float y[]; };           // [m, ldy]
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { GemmParams p; };

layout(local_size_x = 256) in;
#define BM 64
#define BN 64
#define BK 32

#ifdef GEMM_COOPMAT
// Tiles as the cooperative-matrix loads read them: X [BM][BK] and W [BN][BK], both row-major
// in k, so W is loaded column-major as the k x n operand. The result is staged through ys.
shared float16_t xs[BM * BK];
shared float16_t ws[BN * BK];
shared float ys[BM * BN];
void stage(uint m, uint kk, float v) { xs[m * BK + kk] = float16_t(v); }
void stage_w(uint n, uint kk, float v) { ws[n * BK + kk] = float16_t(v); }
#else
// Tiles transposed, [BK][BM] and [BK][BN], so that each invocation reads its 4 rows and its 4
// columns as one vec4 each.
shared vec4 xs4[BK][BM / 4];
shared vec4 ws4[BK][BN / 4];
void stage(uint m, uint kk, float v) { xs4[kk][m / 4][m % 4] = v; }
void stage_w(uint n, uint kk, float v) { ws4[kk][n / 4][n % 4] = v; }
#endif

void main() {
    const uint m_end = min(p.m, step.n_tokens);
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    if (m0 >= m_end) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x;
    // Tile loads: invocation tid stages 8 consecutive k of row tid / 4 in both tiles.
    const uint load_row = tid / 4, load_k = (tid % 4) * 8;

#ifdef GEMM_COOPMAT
    // 16 result blocks of 16 x 16; subgroup s (of 8, 32 invocations each) owns blocks 2s, 2s + 1.
    const uint sg = gl_SubgroupID;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2];
    acc[0] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    acc[1] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#else
    const uint tm = tid / (BN / 4), tn = tid % (BN / 4);  // this invocation's 4 rows and 4 columns
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
#endif

    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        {
            const uint m = m0 + load_row, kk = k0 + load_k;
            for (uint j = 0; j < 8; ++j)
                stage(load_row, load_k + j, m < m_end && kk + j < p.k ? x[m * p.ldx + kk + j] : 0.0);
            float v[8];
            const uint n = n0 + load_row;
            if (n < p.n && kk < p.k) {
                w_load8(n, kk, p.k, v);
            } else {
                for (uint j = 0; j < 8; ++j) v[j] = 0.0;
            }
            for (uint j = 0; j < 8; ++j) stage_w(load_row, load_k + j, v[j]);
        }
        barrier();
#ifdef GEMM_COOPMAT
        for (uint b = 0; b < 2; ++b) {
            const uint block = 2 * sg + b, bm = (block / 4) * 16, bn = (block % 4) * 16;
            for (uint kb = 0; kb < BK; kb += 16) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a, w;
                coopMatLoadNV(a, xs, bm * BK + kb, BK, false);
                coopMatLoadNV(w, ws, bn * BK + kb, BK, true);
                acc[b] = coopMatMulAddNV(a, w, acc[b]);
            }
        }
#else
        for (uint kk = 0; kk < BK; ++kk) {
            const vec4 a = xs4[kk][tm], w = ws4[kk][tn];
            acc[0] += a.x * w;
            acc[1] += a.y * w;
            acc[2] += a.z * w;
            acc[3] += a.w * w;
        }
#endif
        barrier();
    }

#ifdef GEMM_COOPMAT
    for (uint b = 0; b < 2; ++b) {
        const uint block = 2 * sg + b, bm = (block / 4) * 16, bn = (block % 4) * 16;
        coopMatStoreNV(acc[b], ys, bm * BN + bn, BN, false);
    }
    barrier();
    for (uint e = tid; e < BM * BN; e += gl_WorkGroupSize.x) {
        const uint m = m0 + e / BN, n = n0 + e % BN;
        if (m < m_end && n < p.n) {
            const uint at = m * p.ldy + n;
            y[at] = p.accumulate != 0 ? y[at] + ys[e] : ys[e];
        }
    }
#else
    for (uint i = 0; i < 4; ++i) {
        const uint m = m0 + tm * 4 + i;
        if (m >= m_end) break;
        for (uint j = 0; j < 4; ++j) {
            const uint n = n0 + tn * 4 + j;
            if (n < p.n) {
                const uint at = m * p.ldy + n;
                y[at] = p.accumulate != 0 ? y[at] + acc[i][j] : acc[i][j];
            }
        }
    }
#endif
}
