#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef GEMM_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
// gemm_<wtype>: Y[m, n] = X[m, :] · W[n, :] for a prefill chunk, fp32 accumulation.
//
// Each workgroup of 256 invocations computes a BM x BN tile of Y. Per step of BK along k it
// stages the X tile and the W tile (dequantized from any supported weight type, 8 weights per
// load) in shared memory, then multiplies them: on the scalar path each invocation accumulates
// a 4 x 4 sub-tile (64 x 64 tiles); the GEMM_COOPMAT variant (128 x 128 tiles) gives each of
// its 8 subgroups a 32 x 64 sub-tile of 16 x 16 NV cooperative matrices (f16 in, f32 out).
// Rows past step.n_tokens are neither computed nor written: one recorded table serves every
// chunk length.
#include "common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };    // [m, ldx]
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
#define W_BINDING 0
#include "weights.glsl"
layout(std430, binding = 2) buffer Y { float y[]; };             // [m, ldy]
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { GemmParams p; };

layout(local_size_x = 256) in;
#define BK 32

#ifdef GEMM_COOPMAT
#define BM 128
#define BN 128
// Tiles as the cooperative-matrix loads read them: X [BM][BK] and W [BN][BK], both row-major
// in k, so W is loaded column-major as the k x n operand. Results leave through a 16 x 16
// staging block per subgroup, which handles edges, row strides and accumulation.
shared float16_t xs[BM * BK];
shared float16_t ws[BN * BK];
shared float ys[8 * 16 * 16];
void stage_x(uint m, uint kk, float v) { xs[m * BK + kk] = float16_t(v); }
void stage_w(uint n, uint kk, float v) { ws[n * BK + kk] = float16_t(v); }
#else
#define BM 64
#define BN 64
// Tiles transposed, [BK][BM] and [BK][BN], so that each invocation reads its 4 rows and its 4
// columns as one vec4 each.
shared vec4 xs4[BK][BM / 4];
shared vec4 ws4[BK][BN / 4];
void stage_x(uint m, uint kk, float v) { xs4[kk][m / 4][m % 4] = v; }
void stage_w(uint n, uint kk, float v) { ws4[kk][n / 4][n % 4] = v; }
#endif

// Stages X[m0 : m0 + BM, k0 : k0 + BK] and W[n0 : n0 + BN, k0 : k0 + BK], 8 values per item,
// zero outside the matrices.
void stage_tiles(uint m0, uint n0, uint k0, uint m_end) {
    const bool x_vec = (p.ldx & 3u) == 0u;
    for (uint item = gl_LocalInvocationID.x; item < BM * (BK / 8); item += gl_WorkGroupSize.x) {
        const uint row = item / (BK / 8), kk = (item % (BK / 8)) * 8, m = m0 + row, k = k0 + kk;
        float v[8];
        if (m < m_end && x_vec && k + 8 <= p.k) {
            const vec4 a = x4[(m * p.ldx + k) / 4], b = x4[(m * p.ldx + k) / 4 + 1];
            v = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
        } else {
            for (uint j = 0; j < 8; ++j) v[j] = m < m_end && k + j < p.k ? x[m * p.ldx + k + j] : 0.0;
        }
        for (uint j = 0; j < 8; ++j) stage_x(row, kk + j, v[j]);
    }
    for (uint item = gl_LocalInvocationID.x; item < BN * (BK / 8); item += gl_WorkGroupSize.x) {
        const uint row = item / (BK / 8), kk = (item % (BK / 8)) * 8, n = n0 + row, k = k0 + kk;
        float v[8];
        if (n < p.n && k < p.k) {
            w_load8(n, k, p.k, v);
        } else {
            for (uint j = 0; j < 8; ++j) v[j] = 0.0;
        }
        for (uint j = 0; j < 8; ++j) stage_w(row, kk + j, v[j]);
    }
}

void store(uint m, uint n, float v) {
    const uint at = m * p.ldy + n;
    y[at] = p.accumulate != 0 ? y[at] + v : v;
}

void main() {
    const uint m_end = min(p.m, step.n_tokens);
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    if (m0 >= m_end) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x;

#ifdef GEMM_COOPMAT
    // Subgroup sg (of 8, 32 invocations each) owns rows wm .. wm + 31 and columns wn .. wn + 63.
    const uint sg = gl_SubgroupID, wm = (sg / 2) * 32, wn = (sg % 2) * 64;
    // Every loop over the accumulators is unrolled so that they stay in registers.
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4];
    [[unroll]] for (uint i = 0; i < 2; ++i)
        [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#else
    const uint tm = tid / (BN / 4), tn = tid % (BN / 4);  // this invocation's 4 rows and 4 columns
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
#endif

    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        stage_tiles(m0, n0, k0, m_end);
        barrier();
#ifdef GEMM_COOPMAT
        [[unroll]] for (uint kb = 0; kb < BK; kb += 16) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2], w[4];
            [[unroll]] for (uint i = 0; i < 2; ++i) coopMatLoadNV(a[i], xs, (wm + 16 * i) * BK + kb, BK, false);
            [[unroll]] for (uint j = 0; j < 4; ++j) coopMatLoadNV(w[j], ws, (wn + 16 * j) * BK + kb, BK, true);
            [[unroll]] for (uint i = 0; i < 2; ++i)
                [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] = coopMatMulAddNV(a[i], w[j], acc[i][j]);
        }
#else
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
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
    const uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0; i < 2; ++i)
        [[unroll]] for (uint j = 0; j < 4; ++j) {
            coopMatStoreNV(acc[i][j], ys, sg * 256, 16, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256; e += gl_SubgroupSize) {
                const uint m = m0 + wm + 16 * i + e / 16, n = n0 + wn + 16 * j + e % 16;
                if (m < m_end && n < p.n) store(m, n, ys[sg * 256 + e]);
            }
            subgroupBarrier();
        }
#else
    for (uint i = 0; i < 4; ++i) {
        const uint m = m0 + tm * 4 + i;
        if (m >= m_end) break;
        for (uint j = 0; j < 4; ++j) {
            const uint n = n0 + tn * 4 + j;
            if (n < p.n) store(m, n, acc[i][j]);
        }
    }
#endif
}
