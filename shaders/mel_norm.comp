#version 450
#extension GL_GOOGLE_include_directive : require
// mel_norm: one workgroup; Whisper's dynamic-range floor and scaling over the whole log-mel,
// out = (max(out, max(out) - 8) + 4) / 4 (params.h MelParams).
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
layout(std430, binding = 0) buffer Out { float out_data[]; };  // [n_mels, n_frames]
layout(std430, binding = 1) readonly buffer State { MelState state; };
layout(push_constant) uniform Push { MelParams p; };

void main() {
    const uint n = p.n_mels * min(p.max_frames, state.n_frames);
    float m = -1.0 / 0.0;
    for (uint i = gl_LocalInvocationID.x; i < n; i += gl_WorkGroupSize.x) m = max(m, out_data[i]);
    const float floor_value = workgroup_max(m) - 8.0;
    for (uint i = gl_LocalInvocationID.x; i < n; i += gl_WorkGroupSize.x)
        out_data[i] = (max(out_data[i], floor_value) + 4.0) / 4.0;
}
