#version 450
#extension GL_GOOGLE_include_directive : require
// attention: decode attention for one token, one workgroup per query head.
//   1. scores[t] = (q . K[t]) * scale (soft-capped when asked) for t in the window, kept in
//      a scratch row; 2. softmax with a workgroup max and sum; 3. out = sum_t p[t] V[t].
// GQA: query head h reads KV head h / (n_heads / n_kv_heads).
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };              // [n_heads, head_dim]
layout(std430, binding = 1) readonly buffer K { float16_t k_cache[]; };    // [n_kv, max_len, head_dim]
layout(std430, binding = 2) readonly buffer V { float16_t v_cache[]; };    // [n_kv, max_len, head_dim]
layout(std430, binding = 3) buffer S { float scores[]; };                  // [n_heads, max_len]
layout(std430, binding = 4) writeonly buffer O { float out_data[]; };      // [n_heads, head_dim]
layout(std430, binding = 5) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { AttentionParams p; };

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
    const uint h = linear_group_id();
    if (h >= p.n_heads) return;
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint tid = gl_LocalInvocationID.x;
    const uint pos = step.pos;
    const uint first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const uint qb = h * p.head_dim, srow = h * p.max_len;

    float local_max = -1.0 / 0.0;
    for (uint t = first + tid; t <= pos; t += gl_WorkGroupSize.x) {
        const uint kb = (kvh * p.max_len + t) * p.head_dim;
        float s = 0.0;
        for (uint d = 0; d < p.head_dim; ++d) s += q[qb + d] * float(k_cache[kb + d]);
        s *= p.scale;
        if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
        scores[srow + t] = s;
        local_max = max(local_max, s);
    }
    const float m = workgroup_max(local_max);
    float local_sum = 0.0;
    for (uint t = first + tid; t <= pos; t += gl_WorkGroupSize.x) {
        const float e = exp(scores[srow + t] - m);
        scores[srow + t] = e;
        local_sum += e;
    }
    const float inv_sum = 1.0 / workgroup_sum(local_sum);  // its barrier also orders the scores
    memoryBarrierBuffer();
    barrier();
    for (uint d = tid; d < p.head_dim; d += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint t = first; t <= pos; ++t) acc += scores[srow + t] * float(v_cache[(kvh * p.max_len + t) * p.head_dim + d]);
        out_data[qb + d] = acc * inv_sum;
    }
}
