#version 450
#extension GL_GOOGLE_include_directive : require
// pool: one workgroup per packed text; its embedding is the mean of its token rows or its
// first ([CLS]) row, optionally L2-normalized (PoolParams).
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0
layout(std430, binding = 0) readonly buffer H { float h[]; };           // [rows, dim]
layout(std430, binding = 1) readonly buffer Texts { uint texts[]; };    // [AKUNU_POOL_HEADER + 2 max_texts]
layout(std430, binding = 2) buffer Out { float out_data[]; };           // [max_texts, dim]
layout(push_constant) uniform Push { PoolParams p; };

void main() {
    const uint t = linear_group_id();
    if (t >= min(texts[0], p.max_texts)) return;  // uniform across the workgroup
    const uint start = texts[AKUNU_POOL_HEADER + 2 * t], len = texts[AKUNU_POOL_HEADER + 2 * t + 1];
    const bool cls = texts[1] == 1, normalize = texts[2] == 1;
    const uint rows = cls ? 1 : len;
    float sum_sq = 0.0;
    for (uint d = gl_LocalInvocationID.x; d < p.dim; d += gl_WorkGroupSize.x) {
        float acc = 0.0;
        for (uint r = 0; r < rows; ++r) acc += h[(start + r) * p.dim + d];
        acc /= float(rows);
        out_data[t * p.dim + d] = acc;
        sum_sq += acc * acc;
    }
    if (!normalize) return;  // uniform
    const float scale = 1.0 / max(sqrt(workgroup_sum(sum_sq)), 1e-12);
    // Each invocation rescales only the elements it wrote.
    for (uint d = gl_LocalInvocationID.x; d < p.dim; d += gl_WorkGroupSize.x) out_data[t * p.dim + d] *= scale;
}
