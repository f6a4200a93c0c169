#version 450
#extension GL_GOOGLE_include_directive : require
// act_<kind>: out = act(gate) * up, the gated FFN activation (ACT_SILU or ACT_GELU_TANH).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(std430, binding = 2) writeonly buffer O { float out_data[]; };
layout(push_constant) uniform Push { ActParams p; };

float act(float x) {
#if defined(ACT_SILU)
    return x / (1.0 + exp(-x));
#elif defined(ACT_GELU_TANH)
    const float c = 0.7978845608028654;  // sqrt(2 / pi)
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
#else
#error "no ACT_* defined"
#endif
}

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i < p.n) out_data[i] = act(gate[i]) * up[i];
}
