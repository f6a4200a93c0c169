#version 450
#extension GL_GOOGLE_include_directive : require
// layernorm: one workgroup per row; y = (x - mean) * rsqrt(var + eps) * w + b, the encoders'
// norm with a bias (two passes over the row: the mean, then the variance about it, as torch).
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
layout(std430, binding = 0) readonly buffer X { float x[]; };   // [rows, dim]
layout(std430, binding = 1) readonly buffer W { float w[]; };   // [dim]
layout(std430, binding = 2) readonly buffer B { float b[]; };   // [dim]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };  // [rows, dim]; may alias x
layout(std430, binding = 4) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { LayerNormParams p; };

void main() {
    const uint row = linear_group_id();
    if (row >= min(p.rows, step.n_tokens)) return;  // uniform across the workgroup
    const uint base = row * p.dim;
    float sum = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.dim; i += gl_WorkGroupSize.x) sum += x[base + i];
    const float mean = workgroup_sum(sum) / float(p.dim);
    float sum_sq = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.dim; i += gl_WorkGroupSize.x) {
        const float d = x[base + i] - mean;
        sum_sq += d * d;
    }
    const float scale = inversesqrt(workgroup_sum(sum_sq) / float(p.dim) + p.eps);
    // Each invocation writes only the elements it read, so y may be x.
    for (uint i = gl_LocalInvocationID.x; i < p.dim; i += gl_WorkGroupSize.x)
        y[base + i] = (x[base + i] - mean) * scale * w[i] + b[i];
}
