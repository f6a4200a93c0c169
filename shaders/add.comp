#version 450
#extension GL_GOOGLE_include_directive : require
// add_<dtype>: c[r, i] = a[r, i] + b[r, i], in fp32 (residual adds; biases with b_stride 0).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { DTYPE a[]; };
layout(std430, binding = 1) readonly buffer B { DTYPE b[]; };
layout(std430, binding = 2) writeonly buffer C { DTYPE c[]; };
layout(push_constant) uniform Push { AddParams p; };

void main() {
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint r = gid / p.n, i = gid % p.n;
    if (r >= p.rows) return;
    c[r * p.c_stride + i] = DTYPE(float(a[r * p.a_stride + i]) + float(b[r * p.b_stride + i]));
}
