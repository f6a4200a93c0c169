#version 450
#extension GL_GOOGLE_include_directive : require
// mel_power: one workgroup per frame; the power spectrum of the reflect-padded, Hann-windowed
// frame as a product with the cos/sin table (params.h MelParams).
#include "common.glsl"

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
layout(std430, binding = 0) readonly buffer Samples { float samples[]; };  // [n_samples]
layout(std430, binding = 1) readonly buffer Dft { float dft[]; };          // [2 n_bins, n_fft]
layout(std430, binding = 2) writeonly buffer Power { float power[]; };     // [max_frames, n_bins]
layout(std430, binding = 3) readonly buffer State { MelState state; };
layout(push_constant) uniform Push { MelParams p; };

shared float frame[AKUNU_MEL_MAX_FFT];

void main() {
    const uint t = linear_group_id();
    if (t >= min(p.max_frames, state.n_frames)) return;  // uniform across the workgroup
    const int n = int(state.n_samples), start = int(t * p.hop) - int(p.n_fft / 2);
    for (uint i = gl_LocalInvocationID.x; i < p.n_fft; i += gl_WorkGroupSize.x) {
        int s = start + int(i);
        s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);  // numpy's "reflect" padding
        frame[i] = samples[s];
    }
    barrier();
    for (uint f = gl_LocalInvocationID.x; f < p.n_bins; f += gl_WorkGroupSize.x) {
        const uint c = f * p.n_fft, s = (p.n_bins + f) * p.n_fft;
        float re = 0.0, im = 0.0;
        for (uint i = 0; i < p.n_fft; ++i) {
            re += frame[i] * dft[c + i];
            im += frame[i] * dft[s + i];
        }
        power[t * p.n_bins + f] = re * re + im * im;
    }
}
