#version 450
#extension GL_GOOGLE_include_directive : require
// softcap: x = cap * tanh(x / cap) in place, the final-logit soft-capping of gemma2. The model
// records it only when its config has a cap, so other models pay nothing for it.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };  // [rows, n]
layout(std430, binding = 1) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { SoftcapParams p; };

void main() {
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint r = gid / p.n;
    // Rows past the step's tokens hold nothing of this chunk: leave them alone.
    if (r >= min(p.rows, step.n_tokens)) return;
    // tanh saturates to +-1 long before its argument overflows exp, but some drivers compute
    // it as a ratio of exponentials: clamp so that huge logits give +-cap rather than NaN.
    x[gid] = p.cap * tanh(clamp(x[gid] / p.cap, -15.0, 15.0));
}
