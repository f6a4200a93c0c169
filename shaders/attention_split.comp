#version 450
#extension GL_GOOGLE_include_directive : require
// attention_split: one workgroup per (query head, chunk of cache rows). Each invocation scores
// one row; the workgroup forms the chunk's max and sum of exps and its exp-weighted V sum, and
// writes them as a partial [head_dim | max | sum] for attention_merge.
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = AKUNU_ATTENTION_CHUNK) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };              // [n_heads, head_dim]
layout(std430, binding = 1) readonly buffer K { float16_t k_cache[]; };    // [n_kv, max_len, head_dim]
layout(std430, binding = 2) readonly buffer V { float16_t v_cache[]; };    // [n_kv, max_len, head_dim]
layout(std430, binding = 3) writeonly buffer P { float partial[]; };       // [n_heads, n_chunks, head_dim + 2]
layout(std430, binding = 4) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { AttentionParams p; };

shared float weight[AKUNU_ATTENTION_CHUNK];

float workgroup_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) reduce_scratch[gl_SubgroupID] = v;
    barrier();
    float m = -1.0 / 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) m = max(m, reduce_scratch[s]);
    barrier();
    return m;
}

void main() {
    const uint h = gl_WorkGroupID.x, chunk = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint pos = step.pos;
    const uint first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const uint begin = chunk * AKUNU_ATTENTION_CHUNK;
    // Chunks outside the attended rows write nothing; attention_merge does not read them.
    if (begin > pos || begin + AKUNU_ATTENTION_CHUNK <= first) return;  // uniform
    const uint t = begin + tid;
    const bool valid = t >= first && t <= pos;

    float s = -1.0 / 0.0;
    if (valid) {
        const uint qb = h * p.head_dim, kb = (kvh * p.max_len + t) * p.head_dim;
        s = 0.0;
        for (uint d = 0; d < p.head_dim; ++d) s += q[qb + d] * float(k_cache[kb + d]);
        s *= p.scale;
        if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
    }
    const float m = workgroup_max(s);
    const float e = valid ? exp(s - m) : 0.0;
    const float l = workgroup_sum(e);
    weight[tid] = e;
    barrier();

    const uint slot = (h * p.n_chunks + chunk) * (p.head_dim + 2);
    const uint rows = pos >= begin ? min(AKUNU_ATTENTION_CHUNK, pos + 1 - begin) : 0;
    for (uint d = tid; d < p.head_dim; d += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint j = 0; j < rows; ++j) acc += weight[j] * float(v_cache[(kvh * p.max_len + begin + j) * p.head_dim + d]);
        partial[slot + d] = acc;
    }
    if (tid == 0) {
        partial[slot + p.head_dim] = m;
        partial[slot + p.head_dim + 1] = l;
    }
}
