#version 450
#extension GL_GOOGLE_include_directive : require
// attention_rows: causal attention for the rows of a batched step (engine/batch.h), where each
// row belongs to its own sequence: row r at position ROW_POS(r) attends the cache rows
// [max(0, pos + 1 - window), pos] of its sequence's blocks (KV_BATCH, kv_rows.glsl). A row of
// a prompt sees the rows this step wrote before it, as a prefill chunk's does.
//
// Workgroup = (row, query head), one flat index row * n_heads + head, so that the count follows
// the step's rows. The keys come in tiles of one key per invocation: each scores its key against
// q (kept in shared memory), the workgroup's max and sum update an online softmax, and each
// invocation then adds the tile's weighted V rows into the output dims it owns (every
// gl_WorkGroupSize.x-th dim). Every KV format reads through kv_cache_read.glsl; with KV_RECENT
// the row's latest keys and values come from f16 copies (kv_recent.glsl): its sequence's rows
// of this step, which sit side by side from the row of its first position, and its own rings.
// Rows marked tiled (params.h BatchRow) are a query tile's, which the tiled kernels attend.
#include "common.glsl"
#include "reduce.glsl"
#define KV_HEAD_DIM p.a.head_dim
#define KV_ROWS p.a.max_len
#define KV_HEADS p.a.n_kv_heads
#include "kv_cache_read.glsl"

#define LANES 64
#define DIMS_PER_LANE (AKUNU_FLASH_MAX_HEAD_DIM / LANES)
layout(local_size_x = LANES) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };            // [rows, q_stride]
layout(std430, binding = 3) writeonly buffer O { float out_data[]; };    // [rows, out_stride]
layout(std430, binding = 4) readonly buffer Step { STEP_BLOCK };
layout(push_constant) uniform Push { FlashAttentionParams p; };

uint row_first_pos = 0u, row_first_row = 0u, row_seq = 0u;  // the current row's (kv_recent.glsl)
#define KV_PARAMS p.a
#define KV_STEP_POS row_first_pos
#define KV_STEP_ROW0 row_first_row
#define KV_RING_SEQ row_seq
#include "kv_recent.glsl"

shared float q_row[AKUNU_FLASH_MAX_HEAD_DIM];
shared float weights[LANES];  // the tile's softmax weights times the V row scales

void main() {
    const uint gid = linear_group_id();
    const uint row = gid / p.a.n_heads, h = gid % p.a.n_heads;
    if (row >= min(p.rows, step.n_tokens)) return;  // uniform across the workgroup
    if (batch_rows[row].tiled != 0) return;  // a query tile's row (flash_attention, flash_cm)
    const uint lane = gl_LocalInvocationID.x, hd = p.a.head_dim;
    const uint pos = ROW_POS(row);
    ROW_ENTER(row);
    row_seq = batch_rows[row].seq;
    row_first_pos = batch_rows[row].first;
    row_first_row = row - (pos - row_first_pos);
    const uint kvh = h / (p.a.n_heads / p.a.n_kv_heads);
    for (uint i = lane; i < hd; i += LANES) q_row[i] = q[row * p.q_stride + h * hd + i];
    barrier();

    float o[DIMS_PER_LANE];
    for (uint j = 0; j < DIMS_PER_LANE; ++j) o[j] = 0.0;
    float m = -1.0 / 0.0, l = 0.0;
    const uint first = p.a.window > 0 && pos + 1 > p.a.window ? pos + 1 - p.a.window : 0;
    for (uint t0 = first; t0 <= pos; t0 += LANES) {
        const uint t = t0 + lane;
        float s = -1.0 / 0.0;
        if (t <= pos) {
            float d = 0.0;
            if (KV_IS_RECENT(t, pos)) {
                for (uint i = 0; i < hd; ++i) d += q_row[i] * K_RECENT(kvh, t, i);
            } else {
                const kv_row_t r = KV_ROW(kvh, t);
                for (uint i = 0; i < hd; ++i) d += q_row[i] * K_AT(r, i);
                d *= K_SCALE(r);
            }
            s = d * p.a.scale;
            if (p.a.softcap > 0.0) s = p.a.softcap * tanh(s / p.a.softcap);
        }
        const float m_new = max(m, workgroup_max(s));  // finite: key t0 <= pos is in the tile
        const float correction = exp(m - m_new);
        const float w = t <= pos ? exp(s - m_new) : 0.0;
        l = l * correction + workgroup_sum(w);
        weights[lane] = t <= pos ? w * (KV_IS_RECENT(t, pos) ? 1.0 : V_SCALE(KV_ROW(kvh, t))) : 0.0;
        barrier();
        const uint keys = min(LANES, pos + 1 - t0);
        for (uint j = 0; j < DIMS_PER_LANE; ++j) {
            const uint i = lane + j * LANES;
            if (i >= hd) break;
            float acc = o[j] * correction;
            for (uint k = 0; k < keys; ++k) {
                const uint t = t0 + k;
                acc += weights[k] * (KV_IS_RECENT(t, pos) ? V_RECENT(kvh, t, i) : V_AT(KV_ROW(kvh, t), i));
            }
            o[j] = acc;
        }
        barrier();
        m = m_new;
    }
    for (uint j = 0; j < DIMS_PER_LANE; ++j) {
        const uint i = lane + j * LANES;
        if (i < hd) out_data[row * p.out_stride + h * hd + i] = o[j] / l;
    }
}
