#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
// span_split: encoder_attention_weights split over keys (params.h SpanSplitParams). One
// workgroup per (row, head, chunk) scores the chunk's keys of the row's span, stores their
// exp(s - m_c) as the chunk's weights and writes the partial [o_c | m_c | l_c]. The last
// workgroup of a (row, head) to finish merges the partials and normalizes the weights (a
// counter per (row, head) says which is last), so the split costs one dispatch, as
// attention_split.comp's decode step does. Chunks past the span write nothing.
#include "common.glsl"
#include "reduce.glsl"

#define TEAM 8  // invocations per key while scoring, inside one subgroup
layout(local_size_x = AKUNU_SPAN_GROUP) in;  // at least AKUNU_SPAN_MAX_CHUNKS: one chunk each when merging
layout(std430, binding = 0) readonly buffer Q { float q[]; };           // [rows, q_stride]
layout(std430, binding = 1) readonly buffer Kv { float kv[]; };         // [key rows, kv_stride]
layout(std430, binding = 2) readonly buffer Seq { uint seq[]; };        // [rows, 2] (start, len)
layout(std430, binding = 3) readonly buffer Step { StepState step; };
// Coherent: the merging workgroup reads what the others wrote.
layout(std430, binding = 4) coherent buffer W { float weights[]; };     // [rows, n_heads, weights_stride]
layout(std430, binding = 5) coherent buffer P { float partial[]; };     // counters, then the partials
layout(std430, binding = 5) coherent buffer PW { uint partial_words[]; };
layout(std430, binding = 6) writeonly buffer Out { float out_data[]; };  // [rows, out_stride]
layout(push_constant) uniform Push { SpanSplitParams p; };

shared float scores[AKUNU_SPAN_MAX_CHUNK_KEYS];
shared float sums[AKUNU_SPAN_GROUP];
shared bool merging;

// Chunk `chunk`'s partial: scores of keys [key0, key0 + count) of the span at kv row `start`,
// their exp(s - m_c) into the weights at w_base, and [o_c | m_c | l_c] at partial[slot].
void attend_chunk(uint q_base, uint start, uint count, uint head, uint w_base, uint slot) {
    const uint tid = gl_LocalInvocationID.x, hd = p.a.head_dim;
    // Scores: a team of TEAM lanes per key, lane l taking dims l, l + TEAM, ...
    const uint lane = tid % TEAM, team = tid / TEAM, teams = AKUNU_SPAN_GROUP / TEAM;
    for (uint j0 = 0; j0 < count; j0 += teams) {  // a uniform trip count: the shuffles stay in step
        const uint j = min(j0 + team, count - 1);
        const uint k_base = (start + j) * p.a.kv_stride + p.a.k_offset + head * hd;
        float d = 0.0;
        for (uint i = lane; i < hd; i += TEAM) d += q[q_base + i] * kv[k_base + i];
        for (uint w = TEAM / 2; w >= 1; w /= 2) d += subgroupShuffleXor(d, w);
        if (lane == 0 && j0 + team < count) scores[j] = d * p.a.scale;
    }
    barrier();
    float local_max = -1.0 / 0.0;
    for (uint j = tid; j < count; j += AKUNU_SPAN_GROUP) local_max = max(local_max, scores[j]);
    const float m = workgroup_max(local_max);
    float local_sum = 0.0;
    for (uint j = tid; j < count; j += AKUNU_SPAN_GROUP) {
        const float e = exp(scores[j] - m);
        scores[j] = e;
        weights[w_base + j] = e;
        local_sum += e;
    }
    const float l = workgroup_sum(local_sum);  // its barriers publish scores[] too

    // o_c: `groups` invocations per dim, each over every groups-th key, met in shared memory.
    const uint groups = max(1u, AKUNU_SPAN_GROUP / hd), group = tid / hd;
    const uint v_base = start * p.a.kv_stride + p.a.v_offset + head * hd;
    for (uint d0 = 0; d0 < hd; d0 += AKUNU_SPAN_GROUP) {
        const uint d = d0 + tid % hd;
        float acc = 0.0;
        if (group < groups && d < hd)
            for (uint j = group; j < count; j += groups) acc += scores[j] * kv[v_base + j * p.a.kv_stride + d];
        sums[tid] = acc;
        barrier();
        if (tid < min(hd, AKUNU_SPAN_GROUP) && d0 + tid < hd) {
            float total = 0.0;
            for (uint g = 0; g < groups; ++g) total += sums[g * hd + tid];
            partial[slot + d0 + tid] = total;
        }
        barrier();
    }
    if (tid == 0) {
        partial[slot + hd] = m;
        partial[slot + hd + 1] = l;
    }
}

// The merge of (row, head) rh's `used` chunks: invocation c holds chunk c's maximum and sum.
void merge(uint rh, uint row, uint head, uint len, uint used) {
    const uint tid = gl_LocalInvocationID.x, hd = p.a.head_dim, stride = hd + 2;
    const uint base = p.a.rows * p.a.n_heads + rh * p.n_chunks * stride;
    const bool mine = tid < used;
    const float m_c = mine ? partial[base + tid * stride + hd] : -1.0 / 0.0;
    const float M = workgroup_max(m_c);
    const float f = mine ? exp(m_c - M) : 0.0;
    const float L = workgroup_sum(mine ? partial[base + tid * stride + hd + 1] * f : 0.0);
    sums[tid] = f / L;
    barrier();
    const uint w_base = rh * p.a.weights_stride;
    for (uint j = tid; j < len; j += AKUNU_SPAN_GROUP) weights[w_base + j] *= sums[j / p.chunk_keys];
    for (uint d = tid; d < hd; d += AKUNU_SPAN_GROUP) {
        float acc = 0.0;
        for (uint c = 0; c < used; ++c) acc += partial[base + c * stride + d] * sums[c];
        out_data[row * p.a.out_stride + head * hd + d] = acc;
    }
}

void main() {
    const uint gid = linear_group_id(), chunk = gid % p.n_chunks, rh = gid / p.n_chunks;
    const uint row = rh / p.a.n_heads, head = rh % p.a.n_heads;
    if (row >= min(p.a.rows, step.n_tokens)) return;  // uniform across the workgroup
    const uint len = min(seq[2 * row + 1], p.a.weights_stride), key0 = chunk * p.chunk_keys;
    if (key0 >= len) return;  // uniform
    const uint used = (len + p.chunk_keys - 1) / p.chunk_keys;  // chunks that hold keys
    const uint slot = p.a.rows * p.a.n_heads + (rh * p.n_chunks + chunk) * (p.a.head_dim + 2);
    attend_chunk(row * p.a.q_stride + head * p.a.head_dim, seq[2 * row] + key0, min(p.chunk_keys, len - key0), head,
                 rh * p.a.weights_stride + key0, slot);
    // The last chunk to arrive merges: its writes and everyone else's are made visible before the
    // counter moves (the fence, then the barrier), and it resets the counter for the next dispatch.
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0) {
        merging = atomicAdd(partial_words[rh], 1u) == used - 1;
        if (merging) partial_words[rh] = 0u;
    }
    barrier();
    if (!merging) return;  // uniform
    memoryBarrierBuffer();
    merge(rh, row, head, len, used);
}
