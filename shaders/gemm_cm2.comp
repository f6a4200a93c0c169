#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
// gemm_cm2_f16: Y[m, n] (+)= X[m, :] · W[n, :] for a prefill chunk, X and W as halves, on
// workgroup-scope cooperative matrices (GL_NV_cooperative_matrix2; f32 accumulation). With
// GATED, the FFN's gate and up projections and the activation in one dispatch:
// Y[m, n] = act(X · W^T) * (X · U^T) as halves (the down projection's X), from two accumulators
// of the same tile, so neither product goes through memory as floats.
//
// The whole workgroup owns one accumulator of BF output features x BT tokens and steps along
// k, BK at a time, loading W's and X's tiles with tensor layouts: the driver chooses how the
// tiles travel through shared memory and which tensor-core instructions multiply them, which
// gemm_cm.comp (subgroup-scope NV_cooperative_matrix, staged by hand) cannot reach. Tiles past
// the matrices' edges load zeros and store nothing (clamp mode constant), so any m, n and k
// take one path.
//
// Compiled by cmake/glsl_slang.py (Debian 12's glslang predates these extensions). Rows past
// step.n_tokens are neither computed nor written: one recorded table serves every chunk length.
#include "common.glsl"
#include "activation.glsl"

// The tile: features (rows of W), tokens (rows of X) and the k step, and the invocations that
// share it; the host picks them.
layout(constant_id = 0) const uint BF = 128;
layout(constant_id = 1) const uint BT = 128;
layout(constant_id = 2) const uint BK = 64;
layout(constant_id = 3) const uint UNROLL = 4;  // k steps per iteration of the inside tiles' loop
layout(local_size_x_id = 4) in;                 // 256 by default (kernels::gemm)
// The order of the tiles: 0 features fastest (workgroup x along features), 1 tokens fastest, so
// that the workgroups sharing a W tile (one per token tile) are launched one after another and
// W crosses from memory into L2 once while they stream it.
layout(constant_id = 5) const uint TOKENS_FASTEST = 1;
layout(constant_id = 6) const uint GATED = 0;  // 0: Y = X · W^T; 1: SiLU, 2: GELU (tanh) gated by X · U^T

layout(std430, binding = 0) readonly buffer W { float16_t w[]; };  // [n, k]
layout(std430, binding = 1) readonly buffer X { float16_t x[]; };  // [m, ldx]
layout(std430, binding = 2) buffer Y { float y[]; };               // [m, ldy]
layout(std430, binding = 2) writeonly buffer YH { float16_t y_half[]; };  // GATED: [m, ldy] halves
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(std430, binding = 4) readonly buffer U { float16_t w_up[]; };  // GATED: the up matrix [n, k]
layout(push_constant) uniform Push { GemmParams p; };

// GATED's epilogue, element by element: the gate's sum and the up's at the same place.
float gated(const in uint row, const in uint col, const in float gate, const in float up) {
    return (GATED == 1 ? silu(gate) : gelu_tanh(gate)) * up;
}

void main() {
    const uint m_end = min(p.m, step.n_tokens);
    uint tile_t = gl_WorkGroupID.y, tile_f = gl_WorkGroupID.x;
    if (TOKENS_FASTEST != 0) {
        // The launch order is x fastest: renumber the same workgroups so tokens change fastest.
        const uint linear = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        tile_t = linear % gl_NumWorkGroups.y;
        tile_f = linear / gl_NumWorkGroups.y;
    }
    const uint t0 = tile_t * BT, f0 = tile_f * BF;
    if (t0 >= m_end || !AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) return;  // uniform across the workgroup

    // W as [n, k], X as [m_end, k] rows ldx apart, Y as [m_end, n] rows ldy apart. The
    // accumulator is features x tokens, so X and Y are read through a transposing view.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> w_layout = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> x_layout = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> y_layout = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    w_layout = setTensorLayoutDimensionNV(w_layout, p.n, p.k);
    x_layout = setTensorLayoutDimensionNV(x_layout, m_end, p.k);
    x_layout = setTensorLayoutStrideNV(x_layout, p.ldx, 1);
    y_layout = setTensorLayoutDimensionNV(y_layout, m_end, p.n);
    y_layout = setTensorLayoutStrideNV(y_layout, p.ldy, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    coopmat<float, gl_ScopeWorkgroup, BF, BT, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BF, BT, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeWorkgroup, BF, BT, gl_MatrixUseAccumulator> acc_up = acc;  // GATED only
    if (p.accumulate != 0) coopMatLoadTensorNV(acc, y, 0, sliceTensorLayoutNV(y_layout, t0, BT, f0, BF), transposed);
    uint k0 = 0;
    // A tile inside both matrices, with k whole steps of UNROLL: loads through unclamped layouts
    // (no bounds to check) whose row strides are known to be multiples of 8 halves (16 bytes;
    // k and ldx are, gemm_takes_half_x), UNROLL steps an iteration. X's recorded rows run to
    // p.m: a chunk's last token tile reads the rows past step.n_tokens as they are (an earlier
    // chunk's values, or anything). Each token's sums take only its own row of X and the store
    // stays clamped to m_end, so those rows change nothing written, and the tile keeps the
    // unrolled loop instead of the clamped one's single steps.
    if (f0 + BF <= p.n && t0 + BT <= p.m && p.k % (UNROLL * BK) == 0) {
        tensorLayoutNV<2> w_inside = createTensorLayoutNV(2);
        tensorLayoutNV<2> x_inside = createTensorLayoutNV(2);
        w_inside = setTensorLayoutDimensionNV(w_inside, p.n, p.k);
        w_inside = setTensorLayoutStrideNV(w_inside, p.k & ~7u, 1);
        x_inside = setTensorLayoutDimensionNV(x_inside, p.m, p.k);
        x_inside = setTensorLayoutStrideNV(x_inside, p.ldx & ~7u, 1);
        for (; k0 < p.k; k0 += UNROLL * BK) {
            [[unroll]] for (uint u = 0; u < UNROLL; ++u) {
                coopmat<float16_t, gl_ScopeWorkgroup, BF, BK, gl_MatrixUseA> a;
                coopmat<float16_t, gl_ScopeWorkgroup, BK, BT, gl_MatrixUseB> b;
                coopMatLoadTensorNV(a, w, 0, sliceTensorLayoutNV(w_inside, f0, BF, k0 + u * BK, BK));
                coopMatLoadTensorNV(b, x, 0, sliceTensorLayoutNV(x_inside, t0, BT, k0 + u * BK, BK), transposed);
                acc = coopMatMulAdd(a, b, acc);
                if (GATED != 0) {
                    coopMatLoadTensorNV(a, w_up, 0, sliceTensorLayoutNV(w_inside, f0, BF, k0 + u * BK, BK));
                    acc_up = coopMatMulAdd(a, b, acc_up);
                }
            }
        }
    }
    for (; k0 < p.k; k0 += BK) {
        coopmat<float16_t, gl_ScopeWorkgroup, BF, BK, gl_MatrixUseA> a;
        coopmat<float16_t, gl_ScopeWorkgroup, BK, BT, gl_MatrixUseB> b;
        coopMatLoadTensorNV(a, w, 0, sliceTensorLayoutNV(w_layout, f0, BF, k0, BK));
        coopMatLoadTensorNV(b, x, 0, sliceTensorLayoutNV(x_layout, t0, BT, k0, BK), transposed);
        acc = coopMatMulAdd(a, b, acc);
        if (GATED != 0) {
            coopMatLoadTensorNV(a, w_up, 0, sliceTensorLayoutNV(w_layout, f0, BF, k0, BK));
            acc_up = coopMatMulAdd(a, b, acc_up);
        }
    }
    if (GATED != 0) {
        coopMatPerElementNV(acc, acc, gated, acc_up);
        coopmat<float16_t, gl_ScopeWorkgroup, BF, BT, gl_MatrixUseAccumulator> halves =
            coopmat<float16_t, gl_ScopeWorkgroup, BF, BT, gl_MatrixUseAccumulator>(acc);
        coopMatStoreTensorNV(halves, y_half, 0, sliceTensorLayoutNV(y_layout, t0, BT, f0, BF), transposed);
        return;
    }
    coopMatStoreTensorNV(acc, y, 0, sliceTensorLayoutNV(y_layout, t0, BT, f0, BF), transposed);
}
