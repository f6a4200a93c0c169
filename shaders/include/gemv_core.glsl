// The GEMV core that gemv.comp, gemv_gate_up.comp and gemv_parts.comp share: y[r] = dot(W[r, :], x)
// for ROWS rows per workgroup, fp32 accumulation. The entry file says which kernel it is, and
// so which bindings it declares, by defining one of:
//   GEMV_PLAIN    one matrix (every weight type). Float rows that add into the residual stream
//                 may also hand the next RMSNorm forward (GemvParams.norm_out, bindings 4 to 6),
//                 which the GEMVs after them read as AKUNU_GEMV_RMSNORM_READY, and may wait for
//                 a hand-off from the dispatch before (binding 7).
//   GEMV_GATE_UP  float gate and up (kernels::gemv_gate_up): each workgroup takes ROWS / 2 rows
//                 of W0 (gate, binding 0) and the same rows of W1 (up, binding 4) and writes
//                 act(gate) * up to y, the down projection's x: no activation dispatch between.
//   GEMV_PARTS    float Q, K and V (kernels::gemv_parts): up to three matrices (bindings 0, 4, 5)
//                 into their own y (2, 6, 7), their workgroups after the first's, and with
//                 p.rope_head_dim set also rope_kv's work (bindings 8 to 12, rope_fold.glsl).
//
// Bandwidth-bound at batch 1: invocations stride over the row (4 weights per load for float
// types, one 32-element block for block formats) and rows are summed with subgroup adds plus
// one shared-memory pass. A float K that is not a multiple of 4 takes the scalar path.
#include "common.glsl"
#include "activation.glsl"

#if defined(GEMV_GATE_UP)
#define GEMV_MATRICES 2
#elif defined(GEMV_PARTS)
#define GEMV_MATRICES 3
#else
#define GEMV_MATRICES 1
#endif

layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; };   // [k/4]
layout(std430, binding = 1) readonly buffer Xs { float x1[]; };  // [k]
layout(std430, binding = 3) readonly buffer Gv { vec4 g4[]; };   // [k/4] g: the norm weight or up (x_op)
layout(std430, binding = 3) readonly buffer Gs { float g1[]; };
layout(push_constant) uniform Push { GemvParams p; };
// GemvParams.x_op, which the host also passes as this specialization constant, so that the
// driver compiles only the op in use into the inner loops (a runtime switch there measurably
// slowed the f16 GEMVs: bench/NOTES.md).
layout(constant_id = 2) const uint X_OP = AKUNU_GEMV_X;
// x as the products read it (X_OP): through the norm's weight when a norm is fused (its 1/rms
// scale is applied to the finished sums), or the gated activation of x and g.
// A norm handed forward (AKUNU_GEMV_RMSNORM_READY) comes weighted already: x as it is.
const bool PLAIN_X = X_OP == AKUNU_GEMV_X || X_OP == AKUNU_GEMV_RMSNORM_READY;
const bool NORMED = X_OP == AKUNU_GEMV_RMSNORM || X_OP == AKUNU_GEMV_RMSNORM_READY;
#if defined(GEMV_PLAIN)
// Float weights: bits of a hand-off with the dispatch before (kernels::GemvHandoff): 2 waits
// for its signals before reading x, 4 zeroes slots an earlier layer used. x then reads past
// the compute unit's cache: other workgroups wrote it while this dispatch ran.
layout(constant_id = 6) const uint HANDOFF = 0;
const bool HANDOFF_WAIT = (HANDOFF & 2u) != 0, HANDOFF_CLEAR = (HANDOFF & 4u) != 0;
layout(std430, binding = 1) coherent readonly buffer Xc { vec4 x4_coherent[]; };
vec4 x4_read(uint i) { return HANDOFF_WAIT ? x4_coherent[i] : x4[i]; }
#else
const bool HANDOFF_WAIT = false;
vec4 x4_read(uint i) { return x4[i]; }
#endif
vec4 xw4(uint i) { return PLAIN_X ? x4_read(i) : gemv_x_op(X_OP, x4[i], g4[i], p.weight_offset); }
float xw1(uint i) { return PLAIN_X ? x1[i] : gemv_x_op(X_OP, x1[i], g1[i], p.weight_offset); }
#define W_BINDING 0
#define W_TOTAL_BLOCKS (p.rows * (p.k / W_BLOCK))
#define W_X4(i) xw4(i)
#if GEMV_MATRICES > 1
#define W_PARTS GEMV_MATRICES
#endif
#include "weights.glsl"
#if GEMV_MATRICES > 1 && W_BLOCK != 1
#error "the fused GEMVs (gate and up; Q, K and V) take float weights only"
#endif

layout(local_size_x_id = 0) in;               // workgroup size: specialization constant 0
layout(constant_id = 1) const uint ROWS = 4;  // rows per workgroup
#define MAX_ROWS 8
// What an invocation loads of each row before multiplying: vec4s of a float row, or units (4
// code bytes of a block) of a 32-element block row.
layout(constant_id = 3) const uint UNITS = 1;
#define MAX_UNITS 4
// 16-bit float weights with k a multiple of 8: a unit is 8 weights in one 16-byte load (uvec4)
// instead of 4 in an 8-byte one.
layout(constant_id = 4) const bool WIDE = false;
#if defined(GEMV_GATE_UP)
// The gated activation, AKUNU_GEMV_SILU_GATE or _GELU_TANH_GATE; ROWS is even.
layout(constant_id = 5) const uint GATED = AKUNU_GEMV_SILU_GATE;
const bool PAIRS = true;
#else
const bool PAIRS = false;
#endif
// A norm handed forward: how many of its sums each invocation loads before the products, which
// measured faster than loading them all after (bench/NOTES.md, the norm handed forward).
const uint EARLY_SUMS = 8;
#define MAX_SUBGROUPS 128

layout(std430, binding = 2) buffer Y { float y[]; };             // [rows]
#if defined(GEMV_PARTS)
layout(std430, binding = 6) buffer Y1 { float y1[]; };          // [rows1]
layout(std430, binding = 7) buffer Y2 { float y2[]; };          // [rows2]
// ROWS is even, so that a RoPE pair's rows are neighbouring invocations below.
#include "rope_fold.glsl"
#define ROW_AT(part, i) rope_row(part, i)
#else
#define ROW_AT(part, i) (i)
#endif
#if defined(GEMV_PLAIN) && W_BLOCK == 1
// With p.norm_out (GemvParams): the next pre-norm's weight, the residual rows times it, and a
// sum of squares per workgroup; other buffers stand in where it is off (unread).
layout(std430, binding = 4) readonly buffer NormW { float norm_w[]; };        // [rows]
layout(std430, binding = 5) writeonly buffer NormX { float norm_x[]; };       // [rows]
layout(std430, binding = 6) writeonly buffer NormSq { float norm_sq[]; };     // [workgroups]
#define HANDOFF_BINDING 7
#include "handoff.glsl"
#endif
#if defined(WTYPE_F16) || defined(WTYPE_BF16)
#define W_WIDE
layout(std430, binding = W_BINDING) readonly buffer W8 { uvec4 w8[]; };
uvec4 w_load8_0(uint i) { return w8[i]; }
#if GEMV_MATRICES > 1
layout(std430, binding = 4) readonly buffer W8_1 { uvec4 w8_1[]; };
uvec4 w_load8_1(uint i) { return w8_1[i]; }
#endif
#if GEMV_MATRICES > 2
layout(std430, binding = 5) readonly buffer W8_2 { uvec4 w8_2[]; };
uvec4 w_load8_2(uint i) { return w8_2[i]; }
#endif
mat2x4 xw8(uint i) { return mat2x4(xw4(2 * i), xw4(2 * i + 1)); }  // x[8 i .. 8 i + 7]
// dot(8 weights, 8 values of x) with the weights as one uvec4 of halves or bfloat16s.
float dot8(uvec4 u, mat2x4 x) {
#if defined(WTYPE_F16)
    return dot(vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)), x[0]) + dot(vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w)), x[1]);
#else
    const uvec4 lo = u << 16, hi = u & 0xFFFF0000u;
    return dot(uintBitsToFloat(uvec4(lo.x, hi.x, lo.y, hi.y)), x[0]) + dot(uintBitsToFloat(uvec4(lo.z, hi.z, lo.w, hi.w)), x[1]);
#endif
}
#endif

shared float partial[MAX_ROWS][MAX_SUBGROUPS];
shared float sum_sq_partial[MAX_SUBGROUPS];

// What row `row` of matrix `part` becomes, from its total (and up's, for gate and up): called
// by the invocations that hold a row's total (tid < ROWS, or ROWS / 2 with PAIRS), in uniform
// control flow, rows past the matrix included.
#if defined(GEMV_GATE_UP)
void gemv_store(uint group, uint part, uint part_rows, uint row, float total, float up, float y_before, float norm_weight) {
    if (row < p.rows) y[row] = gemv_x_op(GATED, total, up, 0.0);
}
#elif defined(GEMV_PARTS)
void gemv_store(uint group, uint part, uint part_rows, uint row, float total, float up, float y_before, float norm_weight) {
    const float other = rope_partner(total);
    if (row >= part_rows) return;
    row = rope_row(part, row);
    total = rope_fold(part, row, total, other);
    if (part == 0) y[row] = total;
    else if (part == 1) y1[row] = total;
    else y2[row] = total;
}
#else
void gemv_store(uint group, uint part, uint part_rows, uint row, float total, float up, float y_before, float norm_weight) {
    const float v = p.accumulate != 0u ? y_before + total : total;
#if W_BLOCK == 1
    if (p.norm_out != 0u) {
        // The residual rows, the next norm's x and the workgroup's sum of squares (the launcher
        // takes this for one matrix that accumulates, with no norm of its own, and where the
        // workgroup's ROWS invocations here share a subgroup).
        const bool valid = row < part_rows;
        if (valid) {
            y[row] = v;
            norm_x[row] = v * (norm_weight + p.norm_out_offset);
        }
        const float sq = subgroupAdd(valid ? v * v : 0.0);
        if (subgroupElect()) norm_sq[group] = sq;
        return;
    }
#endif
    if (row < part_rows) y[row] = v;
}
#endif

void main() {
    // The matrix of this workgroup's rows (0 unless several are fused) and its row count.
    uint group = linear_group_id(), part = 0, part_rows = p.rows;
#if defined(GEMV_PARTS)
    const uint groups0 = (p.rows + ROWS - 1) / ROWS, groups1 = (p.rows1 + ROWS - 1) / ROWS;
    if (group >= groups0) {
        group -= groups0, part = 1, part_rows = p.rows1;
        if (group >= groups1) group -= groups1, part = 2, part_rows = p.rows2;
    }
#endif
    // PAIRS: rows r < ROWS / 2 of the workgroup are gate rows, the others the same rows of up.
    const uint first_row = PAIRS ? group * (ROWS / 2) : group * ROWS;
    const uint tid = gl_LocalInvocationID.x;
    float acc[MAX_ROWS];
    for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
    // A GEMV that adds into y (the residual stream) loads its rows' old values, and the next
    // norm's weight where it hands that norm forward, before its products, so that their
    // latency hides behind the weight loads instead of ending every workgroup.
#if defined(GEMV_PLAIN)
    const bool adds = p.accumulate != 0u;
#else
    const bool adds = false;
#endif
    const uint own_row = min(first_row + tid, part_rows - 1);
    float y_before = 0.0, norm_weight = 0.0;
    if (adds && tid < ROWS) {
        y_before = y[own_row];
#if defined(GEMV_PLAIN) && W_BLOCK == 1
        if (p.norm_out != 0u) norm_weight = norm_w[own_row];
#endif
    }
    // A norm handed forward: the first EARLY_SUMS * invocations of its sums of squares load
    // now and are added after the products, for the same reason.
    float sums_early[EARLY_SUMS];
    if (X_OP == AKUNU_GEMV_RMSNORM_READY)
        [[unroll]] for (uint j = 0; j < EARLY_SUMS; ++j) {
            const uint i = tid + j * gl_WorkGroupSize.x;
            sums_early[j] = i < p.norm_partials ? g1[i] : 0.0;
        }

#if W_BLOCK == 1
#ifdef W_WIDE
    const bool wide = WIDE && (p.k & 7u) == 0u;
#else
    const bool wide = false;
#endif
    if (wide || (p.k & 3u) == 0u) {
        const uint n = wide ? p.k >> 3 : p.k >> 2;  // units of a row: 8 or 4 weights each
        // One loop per matrix, so that the choice is made once, not per load. UNITS units of
        // each row load before the first product, so that their latencies overlap; units and
        // rows past the end load the last ones again (clamped addresses, no branch around a
        // load) and are not counted. row_at: where each row starts (rope_row puts a folded
        // RoPE's half-split pairs side by side).
        uint row_at[MAX_ROWS];
        [[unroll]] for (uint r = 0; r < ROWS; ++r)
            row_at[r] = (PAIRS ? min(first_row + r % (ROWS / 2), p.rows - 1) : ROW_AT(part, min(first_row + r, part_rows - 1))) * n;
#if defined(GEMV_PLAIN)
        // A waiting GEMV loads its first unit of each row before it waits (the wait is the
        // dispatch before's tail, which these loads overlap), then multiplies it by x.
#define FLOAT_ROWS_AWAIT(X_T, X_LOAD, W_T, W_LOAD, DOT)                                          \
        if (HANDOFF_WAIT) {                                                                      \
            W_T w0[MAX_ROWS];                                                                    \
            [[unroll]] for (uint r = 0; r < ROWS; ++r) w0[r] = W_LOAD(r, row_at[r] + min(tid, n - 1)); \
            handoff_await(p.handoff_wait, p.handoff_wait_count);                                 \
            barrier();                                                                           \
            if (tid < n) {                                                                       \
                const X_T x0 = X_LOAD(tid);                                                      \
                [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] += DOT(w0[r], x0);             \
            }                                                                                    \
            start = tid + gl_WorkGroupSize.x;                                                    \
        }
#else
#define FLOAT_ROWS_AWAIT(X_T, X_LOAD, W_T, W_LOAD, DOT)
#endif
#define FLOAT_ROWS(X_T, X_LOAD, W_T, W_LOAD, DOT)                                                \
        {                                                                                        \
        uint start = tid;                                                                        \
        FLOAT_ROWS_AWAIT(X_T, X_LOAD, W_T, W_LOAD, DOT)                                          \
        for (uint i0 = start; i0 < n; i0 += gl_WorkGroupSize.x * UNITS) {                        \
            X_T xv[MAX_UNITS];                                                                   \
            W_T wv[MAX_UNITS][MAX_ROWS];                                                         \
            [[unroll]] for (uint j = 0; j < UNITS; ++j) {                                        \
                const uint i = min(i0 + j * gl_WorkGroupSize.x, n - 1);                          \
                xv[j] = X_LOAD(i);                                                               \
                [[unroll]] for (uint r = 0; r < ROWS; ++r) wv[j][r] = W_LOAD(r, row_at[r] + i);  \
            }                                                                                    \
            [[unroll]] for (uint j = 0; j < UNITS; ++j)                                          \
                if (i0 + j * gl_WorkGroupSize.x < n)                                             \
                    [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] += DOT(wv[j][r], xv[j]);   \
        }                                                                                        \
        }
        // Row r's unit i of matrix 0, 1 or 2, or with PAIRS of W0 (gate) for r < ROWS / 2 and of
        // W1 (up) for the others. FLOAT_MATRICES: the rows of this kernel's matrices.
#if defined(GEMV_GATE_UP)
#define FLOAT_MATRICES(X_T, X_LOAD, W_T, W, DOT) FLOAT_ROWS(X_T, X_LOAD, W_T, W##_PAIR, DOT)
#elif defined(GEMV_PARTS)
#define FLOAT_MATRICES(X_T, X_LOAD, W_T, W, DOT)                                                 \
        {                                                                                        \
            if (part == 0)                                                                       \
                FLOAT_ROWS(X_T, X_LOAD, W_T, W##_0, DOT)                                         \
            else if (part == 1)                                                                  \
                FLOAT_ROWS(X_T, X_LOAD, W_T, W##_1, DOT)                                         \
            else                                                                                 \
                FLOAT_ROWS(X_T, X_LOAD, W_T, W##_2, DOT)                                         \
        }
#else
#define FLOAT_MATRICES(X_T, X_LOAD, W_T, W, DOT) FLOAT_ROWS(X_T, X_LOAD, W_T, W##_0, DOT)
#endif
#define W8_0(r, i) w_load8_0(i)
#define W8_1(r, i) w_load8_1(i)
#define W8_2(r, i) w_load8_2(i)
#define W8_PAIR(r, i) ((r) < ROWS / 2 ? w_load8_0(i) : w_load8_1(i))
#define W4_0(r, i) w_load4(i)
#define W4_1(r, i) w_load4_1(i)
#define W4_2(r, i) w_load4_2(i)
#define W4_PAIR(r, i) ((r) < ROWS / 2 ? w_load4(i) : w_load4_1(i))
#ifdef W_WIDE
        if (wide)
            FLOAT_MATRICES(mat2x4, xw8, uvec4, W8, dot8)
        else
#endif
            FLOAT_MATRICES(vec4, xw4, vec4, W4, dot)
    } else {  // one matrix (the launcher fuses only rows of a multiple of 4)
        for (uint i = tid; i < p.k; i += gl_WorkGroupSize.x) {
            const float xv = xw1(i);
            for (uint r = 0; r < ROWS; ++r) {
                const uint row = first_row + r;
                if (row < p.rows) acc[r] += w_load1(row * p.k + i) * xv;
            }
        }
    }
#elif defined(W_LANE_X)
    // UNITS units of a lane at a time: x under each unit's codes, formed once for the
    // workgroup's rows, and every row's codes, all loaded before the first product so that
    // their latencies overlap. Units and rows past the end load the last ones again (clamped
    // addresses, no branch around a load) and are not counted.
    const uint blocks = p.k / W_BLOCK, units = blocks * W_LANES, last_row = p.rows - 1;
    for (uint u0 = tid; u0 < units; u0 += gl_WorkGroupSize.x * UNITS) {
        WLaneX xl[MAX_UNITS];
        WLaneW wl[MAX_UNITS][MAX_ROWS];
        [[unroll]] for (uint j = 0; j < UNITS; ++j) {
            const uint u = min(u0 + j * gl_WorkGroupSize.x, units - 1), b = u / W_LANES, lane = u % W_LANES;
            xl[j] = w_lane_x(b, lane);
            [[unroll]] for (uint r = 0; r < ROWS; ++r) wl[j][r] = w_lane_load(min(first_row + r, last_row) * blocks + b, lane);
        }
        [[unroll]] for (uint j = 0; j < UNITS; ++j)
            if (u0 + j * gl_WorkGroupSize.x < units)
                [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] += w_lane_dot_x(wl[j][r], xl[j]);
    }
#else
    const uint blocks = p.k / W_BLOCK;
    for (uint u = tid; u < blocks * W_LANES; u += gl_WorkGroupSize.x) {
        const uint b = u / W_LANES, lane = u % W_LANES;
        for (uint r = 0; r < ROWS; ++r) {
            const uint row = first_row + r;
            if (row < p.rows) acc[r] += w_lane_dot(row * blocks + b, b, lane);
        }
    }
#endif

    float sum_sq = 0.0;
    if (X_OP == AKUNU_GEMV_RMSNORM)
        for (uint i = tid; i < p.k; i += gl_WorkGroupSize.x) sum_sq += x1[i] * x1[i];
    if (X_OP == AKUNU_GEMV_RMSNORM_READY) {  // the producer's sums, one per workgroup of it
        [[unroll]] for (uint j = 0; j < EARLY_SUMS; ++j) sum_sq += sums_early[j];
        for (uint i = tid + EARLY_SUMS * gl_WorkGroupSize.x; i < p.norm_partials; i += gl_WorkGroupSize.x) sum_sq += g1[i];
    }
    for (uint r = 0; r < ROWS; ++r) {
        const float s = subgroupAdd(acc[r]);
        if (subgroupElect()) partial[r][gl_SubgroupID] = s;
    }
    sum_sq = subgroupAdd(sum_sq);
    if (subgroupElect()) sum_sq_partial[gl_SubgroupID] = sum_sq;
    barrier();
#if defined(GEMV_PLAIN) && W_BLOCK == 1
    // Slots whose waits all ended before this dispatch (a barrier lies between): zeroed for the
    // next step by one invocation.
    if (HANDOFF_CLEAR && tid == 0 && linear_group_id() == 0)
        for (uint i = 0; i < p.handoff_clear_count; ++i) handoff[p.handoff_clear + i] = 0;
#endif
    if (tid >= (PAIRS ? ROWS / 2 : ROWS)) return;
    float total = 0.0, up = 0.0, ss = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) {
        total += partial[tid][s];
        if (PAIRS) up += partial[tid + ROWS / 2][s];
        ss += sum_sq_partial[s];
    }
    if (NORMED) {
        const float inv_rms = inversesqrt(ss / float(p.k) + p.eps);
        total *= inv_rms, up *= inv_rms;
    }
    gemv_store(group, part, part_rows, first_row + tid, total, up, y_before, norm_weight);
}
