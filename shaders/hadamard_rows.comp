#version 450
#extension GL_GOOGLE_include_directive : require
// hadamard_rows: the fixed rotation of the int4h KV cache (kv_format.h). Each workgroup
// multiplies one head_dim block of one row in place by the orthonormal Walsh-Hadamard matrix
// of size p.block: a fast transform of log2(block) butterfly stages in shared memory, then the
// 1/sqrt(block) normalisation. Run on Q, K and V after RoPE, before kv_store, and on the
// attention output after attention where the attention does not do it itself
// (attention_split_merge.glsl's write_unrotated, through the same hadamard_shared.glsl): once per
// row and head, never per cache row.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };  // [rows, row_stride]: heads blocks of head_dim from each row's start
layout(std430, binding = 1) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { HadamardRowsParams p; };

shared float s[256];
#define HADAMARD_ROW s
#include "hadamard_shared.glsl"

void main() {
    const uint g = linear_group_id(), row = g / p.heads, head = g % p.heads;
    // Rows past the step's tokens hold nothing of this chunk (uniform over the workgroup).
    if (row >= min(p.rows, step.n_tokens)) return;
    const uint base = row * p.row_stride + head * p.head_dim, lane = gl_LocalInvocationID.x;
    for (uint i = lane; i < p.head_dim; i += 64) s[i] = x[base + i];
    hadamard_butterflies(p.head_dim, p.block, lane, 64);
    const float norm = inversesqrt(float(p.block));
    for (uint i = lane; i < p.head_dim; i += 64) x[base + i] = s[i] * norm;
}
