#version 450
#extension GL_GOOGLE_include_directive : require
// rmsnorm_<dtype>: one workgroup per row; y = x * rsqrt(mean(x^2) + eps) * (w + weight_offset).
// x, w, y share DTYPE unless YTYPE says otherwise (f32 rows normed into the halves a prefill
// GEMM reads as X); sums are fp32. Row addressing as RmsNormParams says.
#include "common.glsl"
#include "reduce.glsl"
#ifndef YTYPE
#define YTYPE DTYPE
#define YTYPE4 DTYPE4
#endif

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
// 4: x, w and y read and written as 4-vectors, where every row and binding starts on 16 bytes
// and dim is a multiple of 4 (kernels::rmsnorm); a quarter of the loads (and sums by dot()).
layout(constant_id = 1) const uint VEC = 1;
layout(std430, binding = 0) readonly buffer X { DTYPE x[]; };       // [rows, dim]
layout(std430, binding = 0) readonly buffer X4 { DTYPE4 x4[]; };
layout(std430, binding = 1) readonly buffer W { DTYPE w[]; };       // [dim]
layout(std430, binding = 1) readonly buffer W4 { DTYPE4 w4[]; };
layout(std430, binding = 2) writeonly buffer Y { YTYPE y[]; };      // [rows, dim]
layout(std430, binding = 2) writeonly buffer Y4 { YTYPE4 y4[]; };
layout(push_constant) uniform Push { RmsNormParams p; };

void main() {
    const uint row = linear_group_id();
    if (row >= p.rows) return;  // uniform across the workgroup, so barriers stay safe
    const uint base = (row / p.group) * p.group_stride + (row % p.group) * p.dim;
    if (VEC == 4) {
        const uint base4 = base / 4, dim4 = p.dim / 4;
        float sum_sq = 0.0;
        for (uint i = gl_LocalInvocationID.x; i < dim4; i += gl_WorkGroupSize.x) {
            const vec4 v = vec4(x4[base4 + i]);
            sum_sq += dot(v, v);
        }
        const float scale = inversesqrt(workgroup_sum(sum_sq) / float(p.dim) + p.eps);
        for (uint i = gl_LocalInvocationID.x; i < dim4; i += gl_WorkGroupSize.x)
            y4[base4 + i] = YTYPE4(vec4(x4[base4 + i]) * scale * (vec4(w4[i]) + p.weight_offset));
        return;
    }
    float sum_sq = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.dim; i += gl_WorkGroupSize.x) {
        float v = float(x[base + i]);
        sum_sq += v * v;
    }
    const float scale = inversesqrt(workgroup_sum(sum_sq) / float(p.dim) + p.eps);
    for (uint i = gl_LocalInvocationID.x; i < p.dim; i += gl_WorkGroupSize.x)
        y[base + i] = YTYPE(float(x[base + i]) * scale * (float(w[i]) + p.weight_offset));
}
