#version 450
#extension GL_GOOGLE_include_directive : require
// mel_log: one workgroup per frame; each mel band's filtered power, log10 and clamped at 1e-10,
// written transposed to [n_mels, n_frames] (params.h MelParams).
#include "common.glsl"

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
layout(std430, binding = 0) readonly buffer Power { float power[]; };     // [max_frames, n_bins]
layout(std430, binding = 1) readonly buffer Filters { float filters[]; }; // [n_mels, n_bins]
layout(std430, binding = 2) writeonly buffer Out { float out_data[]; };  // [n_mels, n_frames]
layout(std430, binding = 3) readonly buffer State { MelState state; };
layout(push_constant) uniform Push { MelParams p; };

void main() {
    const uint t = linear_group_id();
    const uint frames = min(p.max_frames, state.n_frames);
    if (t >= frames) return;  // uniform across the workgroup
    for (uint m = gl_LocalInvocationID.x; m < p.n_mels; m += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint f = 0; f < p.n_bins; ++f) acc += filters[m * p.n_bins + f] * power[t * p.n_bins + f];
        out_data[m * frames + t] = log2(max(acc, 1e-10)) * 0.30102999566398120;  // log10
    }
}
