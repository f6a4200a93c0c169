#version 450
#extension GL_GOOGLE_include_directive : require
// kv_store: the KV-cache write of the quantized formats (kv_format.glsl). Runs after rope_kv
// (built with ROPE_ONLY) or a Q/K/V GEMV with RoPE folded, which leave each token's rotated K in
// qkv (a decode step's row is packed by its attention instead, where attention_packs_newest). One invocation per
// (token row, K or V, kv head, packed word): it forms its row's max |x| (the row is read by
// all of the row's word invocations; it is short and cached), rounds the row scale to f16,
// and packs its word's codes; word 0 also stores the scale. With KV_RING or KV_BLOCKS it writes
// a ring or a cache in blocks (kv_rows.glsl).
#include "common.glsl"
#define KV_ROWS p.max_len
#define KV_HEADS p.n_kv_heads
#define KV_HEAD_DIM p.head_dim
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qkv { float qkv[]; };             // rows of [q | k | v]
#define KV_K_SCALES_BINDING 3
#define KV_V_SCALES_BINDING 4
#include "kv_cache_write.glsl"
layout(std430, binding = 5) readonly buffer Step { STEP_BLOCK };
layout(push_constant) uniform Push { RopeKvParams p; };

void main() {
    // Words of one token's K, then of its V (the formats may differ).
    const uint k_words_row = p.head_dim / KV_PER_WORD(K_FORMAT), v_words_row = p.head_dim / KV_PER_WORD(V_FORMAT);
    const uint k_side = p.n_kv_heads * k_words_row, per_token = k_side + p.n_kv_heads * v_words_row;
    const uint gid = linear_group_id() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint row = gid / per_token, r = gid % per_token;
    if (row >= min(p.rows, step.n_tokens)) return;
    const bool is_v = r >= k_side;
    const uint f = is_v ? V_FORMAT : K_FORMAT, words = is_v ? v_words_row : k_words_row;
    const uint head = (is_v ? r - k_side : r) / words, w = (is_v ? r - k_side : r) % words;
    const uint q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    const uint src = row * p.row_stride + q_dim + (is_v ? kv_dim : 0) + head * p.head_dim;

    float amax = 0.0;
    for (uint d = 0; d < p.head_dim; ++d) amax = max(amax, abs(qkv[src + d]));
    const float scale = kv_row_scale(amax, f);
    const float inv = kv_inverse(scale);
    uint packed = 0;
    const uint per_word = KV_PER_WORD(f);
    for (uint j = 0; j < per_word; ++j) packed |= kv_encode(qkv[src + w * per_word + j] * inv, f) << (j * KV_BITS(f));

    ROW_ENTER(row);
    const kv_row_t cache_row = KV_ROW(head, ROW_POS(row));
    if (is_v) {
        V_WORD_STORE(cache_row, words, w, packed);
        if (w == 0) V_SCALE_STORE(cache_row, float16_t(scale));
    } else {
        K_WORD_STORE(cache_row, words, w, packed);
        if (w == 0) K_SCALE_STORE(cache_row, float16_t(scale));
    }
}
