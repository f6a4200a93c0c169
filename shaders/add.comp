#version 450
#extension GL_GOOGLE_include_directive : require
// add_<dtype>: c[i] = a[i] + b[i], in fp32 (the residual add).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { DTYPE a[]; };
layout(std430, binding = 1) readonly buffer B { DTYPE b[]; };
layout(std430, binding = 2) writeonly buffer C { DTYPE c[]; };
layout(push_constant) uniform Push { AddParams p; };

void main() {
    uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    c[i] = DTYPE(float(a[i]) + float(b[i]));
}
