#version 450
#extension GL_GOOGLE_include_directive : require
// conv_gather: the im2col columns of a Conv1d (ConvGatherParams), one element per invocation;
// a GEMM against the convolution's weight [out, channels * kernel] then convolves.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };  // windows of [channels, t_in] at the strides
layout(std430, binding = 1) writeonly buffer O { float out_data[]; };  // [rows, channels * kernel]
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { ConvGatherParams p; };

void main() {
    const uint i = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint width = p.channels * p.kernel;
    const uint row = i / width, col = i % width;
    if (row >= min(p.rows, step.n_tokens)) return;
    const uint w = row / p.t_out, t = row % p.t_out, c = col / p.kernel, k = col % p.kernel;
    const int at = int(t * p.stride + k) - int(p.pad);
    float v = 0.0;
    if (at >= 0 && at < int(p.t_in)) v = x[w * p.window_stride + c * p.c_stride + uint(at) * p.t_stride];
    out_data[i] = v;
}
