#version 450
#extension GL_GOOGLE_include_directive : require
// copy_rows: f32 rows from src to dst through row indices (CopyRowsParams), one element per
// invocation. src and dst may be one buffer where the rows do not meet (a sequence's cache
// into another's).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) readonly buffer Sr { uint src_rows[]; };  // [rows]
layout(std430, binding = 2) writeonly buffer D { float dst[]; };
layout(std430, binding = 3) readonly buffer Dr { uint dst_rows[]; };  // [rows]
layout(std430, binding = 4) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { CopyRowsParams p; };

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint row = i / p.n, col = i % p.n;
    if (row >= min(p.rows, step.n_tokens)) return;
    dst[dst_rows[row] * p.dst_stride + col] = src[src_rows[row] * p.src_stride + col];
}
