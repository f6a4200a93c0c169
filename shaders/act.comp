#version 450
#extension GL_GOOGLE_include_directive : require
// act_<kind>: out = act(gate) * up, the gated FFN activation (ACT_SILU or ACT_GELU_TANH); with
// ACT_UNGATED, out = act(gate) (the encoders' FFN; ACT_GELU is GELU with erf, as BERT's).
// ACT_NONE with ACT_UNGATED and halves out: to_half, f32 rows as halves for a GEMM that reads them.
// OTYPE float16_t writes halves: the X of a prefill chunk's down-projection GEMM.
#include "common.glsl"
#include "activation.glsl"
#ifndef OTYPE
#define OTYPE float
#endif

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(std430, binding = 2) writeonly buffer O { OTYPE out_data[]; };
layout(push_constant) uniform Push { ActParams p; };

float act(float x) {
#if defined(ACT_SILU)
    return silu(x);
#elif defined(ACT_GELU)
    return gelu_erf(x);
#elif defined(ACT_GELU_TANH)
    return gelu_tanh(x);
#elif defined(ACT_NONE)
    return x;
#else
#error "no ACT_* defined"
#endif
}

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
#ifdef ACT_UNGATED
    if (i < p.n) out_data[i] = OTYPE(act(gate[i]));
#else
    if (i < p.n) out_data[i] = OTYPE(act(gate[i]) * up[i]);
#endif
}
