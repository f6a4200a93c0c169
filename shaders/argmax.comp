#version 450
#extension GL_GOOGLE_include_directive : require
// argmax: the index of the largest logit (the lowest such index, as NumPy's argmax), written to
// token_ids[out_slot] so the next step can embed it without the CPU.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) buffer Ids { uint token_ids[]; };
layout(push_constant) uniform Push { ArgmaxParams p; };

shared float best_v[256];
shared uint best_i[256];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    float bv = -1.0 / 0.0;
    uint bi = 0xFFFFFFFFu;
    for (uint i = tid; i < p.n; i += gl_WorkGroupSize.x) {
        const float v = logits[i];
        if (v > bv || bi == 0xFFFFFFFFu) {
            bv = v;
            bi = i;
        }
    }
    best_v[tid] = bv;
    best_i[tid] = bi;
    barrier();
    for (uint stride = gl_WorkGroupSize.x / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            const float ov = best_v[tid + stride];
            const uint oi = best_i[tid + stride];
            if (oi != 0xFFFFFFFFu && (ov > best_v[tid] || (ov == best_v[tid] && oi < best_i[tid]))) {
                best_v[tid] = ov;
                best_i[tid] = oi;
            }
        }
        barrier();
    }
    if (tid == 0) token_ids[p.out_slot] = best_i[0];
}
