#version 450
#extension GL_GOOGLE_include_directive : require
// encoder_attention: softmax(q K^T * scale) V for one (query row, head) per workgroup, over the
// row's span of key rows (EncoderAttentionParams). Scores of the whole span sit in shared
// memory: each invocation scores every 64th key, then the workgroup's max and sum normalize
// them, then each invocation forms every 64th output dim. ATTN_WEIGHTS also stores the
// normalized scores (cross-attention weights, for alignment).
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };           // [rows, q_stride]
layout(std430, binding = 1) readonly buffer Kv { float kv[]; };         // [key rows, kv_stride]
layout(std430, binding = 2) readonly buffer Seq { uint seq[]; };        // [rows, 2] (start, len)
layout(std430, binding = 3) readonly buffer Step { StepState step; };
layout(std430, binding = 4) writeonly buffer Out { float out_data[]; };  // [rows, out_stride]
#ifdef ATTN_WEIGHTS
layout(std430, binding = 5) writeonly buffer W { float weights[]; };  // [rows, n_heads, weights_stride]
#endif
layout(push_constant) uniform Push { EncoderAttentionParams p; };

shared float scores[AKUNU_ENCODER_MAX_KEYS];

void main() {
    const uint gid = linear_group_id();
    const uint row = gid / p.n_heads, head = gid % p.n_heads;
    if (row >= min(p.rows, step.n_tokens)) return;  // uniform across the workgroup
    const uint start = seq[2 * row], len = min(seq[2 * row + 1], AKUNU_ENCODER_MAX_KEYS);
    const uint lane = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
    const uint q_base = row * p.q_stride + head * p.head_dim;
    float local_max = -1.0 / 0.0;
    for (uint j = lane; j < len; j += lanes) {
        const uint k_base = (start + j) * p.kv_stride + p.k_offset + head * p.head_dim;
        float s = 0.0;
        for (uint d = 0; d < p.head_dim; ++d) s += q[q_base + d] * kv[k_base + d];
        s *= p.scale;
        scores[j] = s;
        local_max = max(local_max, s);
    }
    const float m = workgroup_max(local_max);  // its barriers publish scores[] too
    float local_sum = 0.0;
    for (uint j = lane; j < len; j += lanes) {
        const float e = exp(scores[j] - m);
        scores[j] = e;
        local_sum += e;
    }
    const float inv_total = 1.0 / workgroup_sum(local_sum);
#ifdef ATTN_WEIGHTS
    const uint w_base = gid * p.weights_stride;
    for (uint j = lane; j < len; j += lanes) weights[w_base + j] = scores[j] * inv_total;
#endif
    const uint v_base = start * p.kv_stride + p.v_offset + head * p.head_dim;
    for (uint d = lane; d < p.head_dim; d += lanes) {
        float acc = 0.0;
        for (uint j = 0; j < len; ++j) acc += scores[j] * kv[v_base + j * p.kv_stride + d];
        out_data[row * p.out_stride + head * p.head_dim + d] = acc * inv_total;
    }
}
