#version 450
#extension GL_GOOGLE_include_directive : require
// embed_<wtype>: out[r] = scale * W[token, :] for the token in token_ids[step.token_slot + r],
// dequantized to f32. One invocation per element (float types) or per AKUNU_EMBED_BLOCK_ITEM
// elements of a block (block formats) of each row. W may be a window of the table's rows
// (EmbedParams.first_row): rows whose token lies outside it are left to another dispatch.
#include "common.glsl"
layout(push_constant) uniform Push { EmbedParams p; };
#define W_BINDING 0
#define W_TOTAL_BLOCKS (p.vocab * (p.dim / W_BLOCK))
#include "weights.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer Ids { uint token_ids[]; };
layout(std430, binding = 2) readonly buffer Step { StepState step; };
layout(std430, binding = 3) writeonly buffer Out { float out_data[]; };  // [rows, dim]

#if W_BLOCK == 1
#define ITEM 1
#else
#define ITEM AKUNU_EMBED_BLOCK_ITEM
#endif

void main() {
    const uint items = p.dim / ITEM;
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint row = gid / items, i = gid % items;
    if (row >= min(p.rows, step.n_tokens)) return;
    const uint token = token_ids[step.token_slot + row] - p.first_row;  // wraps below the window
    if (token >= p.vocab) return;
    const uint out_base = row * p.dim;
#if W_BLOCK == 1
    out_data[out_base + i] = p.scale * w_load1(token * p.dim + i);
#else
    float v[ITEM];
    w_load8(token, i * ITEM, p.dim, v);
    for (uint j = 0; j < ITEM; ++j) out_data[out_base + i * ITEM + j] = p.scale * v[j];
#endif
}
