#version 450
#extension GL_GOOGLE_include_directive : require
// embed_<wtype>: out = scale * W[token, :], the row of the token in token_ids[step.token_slot],
// dequantized to f32. One invocation per element (float types) or per block (block formats).
#include "common.glsl"
#define W_BINDING 0
#include "weights.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer Ids { uint token_ids[]; };
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(std430, binding = 3) writeonly buffer Out { float out_data[]; };  // [dim]
layout(push_constant) uniform Push { EmbedParams p; };

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint token = token_ids[step.token_slot];
#if W_BLOCK == 1
    if (i < p.dim) out_data[i] = p.scale * w_load1(token * p.dim + i);
#else
    const uint blocks = p.dim / W_BLOCK;
    if (i < blocks) {
        float v[32];
        w_block(token * blocks + i, v);
        for (uint j = 0; j < 32; ++j) out_data[i * 32 + j] = p.scale * v[j];
    }
#endif
}
