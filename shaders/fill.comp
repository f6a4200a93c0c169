#version 450
#extension GL_GOOGLE_include_directive : require
// fill_<dtype>: out[i] = value. Used to poison outputs in tests and to clear buffers.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Out { DTYPE out_data[]; };
layout(push_constant) uniform Push { FillParams p; };

void main() {
    uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n) return;
#ifdef FILL_RAW_BITS
    out_data[i] = DTYPE(p.bits);
#else
    out_data[i] = DTYPE(p.value);
#endif
}
