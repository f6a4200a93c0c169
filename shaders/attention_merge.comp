#version 450
#extension GL_GOOGLE_include_directive : require
// attention_merge: out[h] = sum_c acc_c * exp(m_c - M) / sum_c l_c * exp(m_c - M), over the
// chunks attention_split wrote: those holding rows the query at step.pos attends (a cache of
// any capacity costs only the chunks in use).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer P { float partial[]; };   // [n_heads, n_chunks, head_dim + 2]
layout(std430, binding = 1) writeonly buffer O { float out_data[]; };  // [n_heads, head_dim]
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { AttentionParams p; };

void main() {
    const uint h = linear_group_id();
    if (h >= p.n_heads) return;
    const uint stride = p.head_dim + 2, base = h * p.n_chunks * stride;
    const uint pos = step.pos, first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const uint c_begin = first / AKUNU_ATTENTION_CHUNK, c_end = pos / AKUNU_ATTENTION_CHUNK + 1;
    float M = -1.0 / 0.0;
    for (uint c = c_begin; c < c_end; ++c)
        if (partial[base + c * stride + p.head_dim + 1] > 0.0) M = max(M, partial[base + c * stride + p.head_dim]);
    float L = 0.0;
    for (uint c = c_begin; c < c_end; ++c) {
        const float l = partial[base + c * stride + p.head_dim + 1];
        if (l > 0.0) L += l * exp(partial[base + c * stride + p.head_dim] - M);
    }
    for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint c = c_begin; c < c_end; ++c) {
            const float l = partial[base + c * stride + p.head_dim + 1];
            if (l > 0.0) acc += partial[base + c * stride + d] * exp(partial[base + c * stride + p.head_dim] - M);
        }
        out_data[h * p.head_dim + d] = acc / L;
    }
}
