#version 450
#extension GL_GOOGLE_include_directive : require
// act_<kind>: out = act(gate) * up, the gated FFN activation (ACT_SILU or ACT_GELU_TANH); with
// ACT_UNGATED, out = act(gate) (the encoders' FFN; ACT_GELU is GELU with erf, as BERT's).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(std430, binding = 2) writeonly buffer O { float out_data[]; };
layout(push_constant) uniform Push { ActParams p; };

float act(float x) {
#if defined(ACT_SILU)
    return x / (1.0 + exp(-x));
#elif defined(ACT_GELU)
    // erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7); GLSL has no erf.
    const float z = abs(x) * 0.7071067811865476;
    const float t = 1.0 / (1.0 + 0.3275911 * z);
    const float poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
    const float erf_z = sign(x) * (1.0 - poly * exp(-z * z));
    return 0.5 * x * (1.0 + erf_z);
#elif defined(ACT_GELU_TANH)
    const float c = 0.7978845608028654;  // sqrt(2 / pi)
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
#else
#error "no ACT_* defined"
#endif
}

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
#ifdef ACT_UNGATED
    if (i < p.n) out_data[i] = act(gate[i]);
#else
    if (i < p.n) out_data[i] = act(gate[i]) * up[i];
#endif
}
