#version 450
#extension GL_GOOGLE_include_directive : require
// last_row: dst = src[step.n_tokens - 1], the last token of a prefill chunk, so that the
// output norm and LM head that follow are the decode step's, reading one row.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };  // [rows, dim]
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };  // [dim]
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { LastRowParams p; };

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i < p.dim) dst[i] = src[(step.n_tokens - 1) * p.dim + i];
}
