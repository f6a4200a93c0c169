#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// dequant_f16_<wtype>: out[n, k] = W[n, k] as halves, for a block format, when the prefill chunk
// holds at least p.min_rows tokens (else nothing). One invocation per 8 weights, through the
// cooperative-matrix GEMM's own tile loaders (w_raw8, w_half8), so the halves are exactly the
// ones that GEMM would have staged: a long chunk's GEMM then streams f16 weights with one
// 16-byte load per 8 instead of two to six 16-bit loads and a decode per tile and workgroup.
#include "common.glsl"
layout(push_constant) uniform Push { DequantParams p; };
#define W_BINDING 0
#define W_TOTAL_BLOCKS (p.n * (p.k / W_BLOCK))
#define W_LOAD8_HALF
#include "weights.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 1) writeonly buffer Out { uvec4 out8[]; };  // [n, k / 8]
layout(std430, binding = 2) readonly buffer Step { StepState step; };

void main() {
    if (step.n_tokens < p.min_rows) return;
    const uint item = linear_group_id() * 256 + gl_LocalInvocationID.x, per_row = p.k / 8;
    if (item >= p.n * per_row) return;
    const uint row = item / per_row, k0 = 8 * (item % per_row);
    out8[item] = w_half8(w_raw8(row, k0, p.k), k0);
}
