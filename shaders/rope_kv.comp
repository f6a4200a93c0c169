#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// rope_kv: RoPE on each token's Q and K (in place in qkv), fused with the KV-cache write.
// Per token row: first the Q pairs, then the K pairs (rotated, then written to the cache),
// then the V elements (copied to the cache). cos/sin come from the table row of the token's
// position, step.pos + row. Built with ROPE_ONLY for the quantized cache formats: it only
// rotates, and kv_store packs the rotated K and V into the cache. With KV_RING or KV_BLOCKS it
// writes a ring or a cache in blocks, with KV_BATCH each row into its own sequence's blocks
// (kv_rows.glsl).
#include "common.glsl"
#define KV_ROWS p.max_len
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
// Consecutive pairs (and V elements) an invocation takes: 1, or 4 where head_dim is a multiple
// of 8 and the rows and tables start on 16 bytes (kernels::rope_kv): then each reads and writes
// whole vec4s, and a quarter of the invocations work out their place.
layout(constant_id = 0) const uint VEC = 1;
layout(std430, binding = 0) buffer Qkv { float qkv_data[]; };              // rows of [q | k | v]
layout(std430, binding = 0) buffer Qkv4 { vec4 qkv4[]; };
layout(std430, binding = 1) readonly buffer Cos { float cos_t[]; };        // [max_len, head_dim/2]
layout(std430, binding = 1) readonly buffer Cos4 { vec4 cos4[]; };
layout(std430, binding = 2) readonly buffer Sin { float sin_t[]; };        // [max_len, head_dim/2]
layout(std430, binding = 2) readonly buffer Sin4 { vec4 sin4[]; };
#ifdef KV_BLOCKS
// The block tables, [blocks] addresses. Not read-only: the command list orders dispatches by
// the buffers they write, and the table stands for the blocks written through it.
layout(std430, binding = 3) buffer KT { uvec2 k_blocks[]; };
layout(std430, binding = 4) buffer VT { uvec2 v_blocks[]; };
#define K_STORE(r, i, val) KvHalfs(k_blocks[(r).x]).h[(r).y * p.head_dim + (i)] = (val)
#define V_STORE(r, i, val) KvHalfs(v_blocks[(r).x]).h[(r).y * p.head_dim + (i)] = (val)
#else
layout(std430, binding = 3) writeonly buffer K { float16_t k_cache[]; };   // [n_kv, max_len, head_dim]
layout(std430, binding = 4) writeonly buffer V { float16_t v_cache[]; };   // [n_kv, max_len, head_dim]
#define K_STORE(r, i, val) k_cache[(r) * p.head_dim + (i)] = (val)
#define V_STORE(r, i, val) v_cache[(r) * p.head_dim + (i)] = (val)
#endif
layout(std430, binding = 5) readonly buffer Step { STEP_BLOCK };
layout(push_constant) uniform Push { RopeKvParams p; };

uint row_base;
#define qkv(i) qkv_data[row_base + (i)]
#define qkv4(i) qkv4[(row_base + (i)) / 4]

// Pairs f0 .. f0 + 3 of one head whose row starts at `base`, for VEC 4.
void rope4(uint base, uint f0, uint pos, bool is_k, uint head) {
    const uint half_dim = p.head_dim / 2;
    const bool inter = p.interleaved != 0;
    // Interleaved pairs are elements 2 f .. 2 f + 7 (two vec4s); split pairs f and f + half_dim.
    const uint at0 = inter ? base + 2 * f0 : base + f0, at1 = inter ? at0 + 4 : at0 + half_dim;
    const vec4 u = qkv4(at0), v = qkv4(at1);
    vec4 x0 = inter ? vec4(u.x, u.z, v.x, v.z) : u, x1 = inter ? vec4(u.y, u.w, v.y, v.w) : v;
    if (p.rotate != 0) {
        const vec4 c = cos4[(pos * half_dim + f0) / 4], s = sin4[(pos * half_dim + f0) / 4];
        const vec4 r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
        x0 = r0;
        x1 = r1;
        qkv4(at0) = inter ? vec4(x0.x, x1.x, x0.y, x1.y) : x0;
        qkv4(at1) = inter ? vec4(x0.z, x1.z, x0.w, x1.w) : x1;
    }
#ifndef ROPE_ONLY
    if (is_k) {
        const kv_row_t r = KV_ROW(head, pos);
        [[unroll]] for (uint j = 0; j < 4; ++j) {
            const uint a = inter ? 2 * (f0 + j) : f0 + j, b = inter ? a + 1 : a + half_dim;
            K_STORE(r, a, float16_t(x0[j]));
            K_STORE(r, b, float16_t(x1[j]));
        }
    }
#endif
}

void main() {
    const uint half_dim = p.head_dim / 2;
    const uint q_pairs = p.n_heads * half_dim, k_pairs = p.n_kv_heads * half_dim;
    const uint q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    const uint per_row = (q_pairs + k_pairs + kv_dim) / VEC;
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint row = gid / per_row, i = gid % per_row;
    if (row >= min(p.rows, step.n_tokens)) return;
    row_base = row * p.row_stride;
    const uint pos = ROW_POS(row);
    ROW_ENTER(row);
    if (VEC == 4) {
        if (4 * i < q_pairs + k_pairs) {
            const bool is_k = 4 * i >= q_pairs;
            const uint pair = is_k ? 4 * i - q_pairs : 4 * i;
            const uint head = pair / half_dim;
            rope4((is_k ? q_dim : 0) + head * p.head_dim, pair % half_dim, pos, is_k, head);
        }
#ifndef ROPE_ONLY
        else {
            const uint e = 4 * i - q_pairs - k_pairs, head = e / p.head_dim, d = e % p.head_dim;
            const vec4 v = qkv4(q_dim + kv_dim + e);
            const kv_row_t r = KV_ROW(head, pos);
            [[unroll]] for (uint j = 0; j < 4; ++j) V_STORE(r, d + j, float16_t(v[j]));
        }
#endif
        return;
    }
    if (i < q_pairs + k_pairs) {
        const bool is_k = i >= q_pairs;
        const uint pair = is_k ? i - q_pairs : i;
        const uint head = pair / half_dim, f = pair % half_dim;
        const uint a = p.interleaved != 0 ? 2 * f : f;
        const uint b = p.interleaved != 0 ? 2 * f + 1 : f + half_dim;
        const uint base = (is_k ? q_dim : 0) + head * p.head_dim;
        float x0 = qkv(base + a), x1 = qkv(base + b);
        if (p.rotate != 0) {
            const float c = cos_t[pos * half_dim + f], s = sin_t[pos * half_dim + f];
            const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
            x0 = r0;
            x1 = r1;
            qkv(base + a) = x0;
            qkv(base + b) = x1;
        }
#ifndef ROPE_ONLY
        if (is_k) {
            const kv_row_t r = KV_ROW(head, pos);
            K_STORE(r, a, float16_t(x0));
            K_STORE(r, b, float16_t(x1));
        }
    } else {
        const uint e = i - q_pairs - k_pairs;
        const uint head = e / p.head_dim, d = e % p.head_dim;
        V_STORE(KV_ROW(head, pos), d, float16_t(qkv(q_dim + kv_dim + e)));
#endif
    }
}
