#version 450
#extension GL_GOOGLE_include_directive : require
// kv_recent_store: the ring of a windowed cache (kv_recent.glsl) takes the step's K and V rows
// as f16, position t in row t % ring rows, after the step's attention has read the ring's older
// rows. One invocation per (token row, element of its [k | v]); a row whose ring row a later row
// of the same step takes (pos + ring rows is in the step) is skipped, so no two rows race.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qkv { float qkv[]; };           // rows of [q | k | v]
layout(std430, binding = 1) writeonly buffer KR { float16_t k_recent[]; };  // [n_kv, ring rows, head_dim]
layout(std430, binding = 2) writeonly buffer VR { float16_t v_recent[]; };  // [n_kv, ring rows, head_dim]
#ifdef KV_BATCH
layout(std430, binding = 3) readonly buffer Step { StepState step; BatchRow batch_rows[]; };
#else
layout(std430, binding = 3) readonly buffer Step { StepState step; };
#endif
layout(push_constant) uniform Push { RopeKvParams p; };  // max_len: the ring's rows per head

void main() {
    const uint kv_dim = p.n_kv_heads * p.head_dim, q_dim = p.n_heads * p.head_dim;
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint row = gid / (2 * kv_dim), e = gid % (2 * kv_dim);
    const uint n = min(p.rows, step.n_tokens);
    if (row >= n) return;
#ifdef KV_BATCH
    const uint pos = batch_rows[row].pos, ring = batch_rows[row].seq * p.n_kv_heads;
    if (pos + p.max_len < batch_rows[row].end) return;
#else
    const uint pos = step.pos + row, ring = 0u;
    if (row + p.max_len < n) return;
#endif
    const uint i = e % kv_dim;
    const uint at = ((ring + i / p.head_dim) * p.max_len + pos % p.max_len) * p.head_dim + i % p.head_dim;
    const float16_t x = float16_t(qkv[row * p.row_stride + q_dim + e]);
    if (e < kv_dim)
        k_recent[at] = x;
    else
        v_recent[at] = x;
}
