#version 450
#extension GL_GOOGLE_include_directive : require
// copy_u32: dst[i] = src[i] over n 32-bit words; 16-byte loads when n % 4 == 0. Dtype-agnostic
// (it moves bits), and the kernel the bandwidth benchmark measures the device's copy rate with.
//
// read_u32 (READ_ONLY): the same loads and no stores, for the device's read rate, which is what
// decode's GEMVs need. A vector of four all-ones words (never in the benchmark's random bytes:
// one chance in 2^128) writes dst[0], so the compiler must keep every load.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Sv { uvec4 src4[]; };
layout(std430, binding = 0) readonly buffer Ss { uint src1[]; };
layout(std430, binding = 1) writeonly buffer Dv { uvec4 dst4[]; };
layout(std430, binding = 1) writeonly buffer Ds { uint dst1[]; };
layout(push_constant) uniform Push { CopyParams p; };

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
#if defined(READ_ONLY)
    if (i < (p.n >> 2) && all(equal(src4[i], uvec4(0xFFFFFFFFu)))) dst1[0] = i;
#else
    if ((p.n & 3u) == 0u) {
        if (i < (p.n >> 2)) dst4[i] = src4[i];
    } else if (i < p.n) {
        dst1[i] = src1[i];
    }
#endif
}
