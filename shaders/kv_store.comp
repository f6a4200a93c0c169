#version 450
#extension GL_GOOGLE_include_directive : require
// kv_store: the KV-cache write of the quantized formats (kv_format.glsl). Runs after rope_kv
// (built with ROPE_ONLY), which leaves each token's rotated K in qkv. One invocation per
// (token row, K or V, kv head, packed word): it forms its row's max |x| (the row is read by
// all of the row's word invocations; it is short and cached), rounds the row scale to f16,
// and packs its word's codes; word 0 also stores the scale. With KV_RING or KV_BLOCKS it writes
// a ring or a cache in blocks (kv_rows.glsl).
#include "common.glsl"
#include "kv_format.glsl"
#define KV_ROWS p.max_len
#define KV_HEADS p.n_kv_heads
#define KV_HEAD_DIM p.head_dim
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qkv { float qkv[]; };             // rows of [q | k | v]
#ifdef KV_BLOCKS
// The block tables, [blocks] addresses (the scales sit in the blocks: no bindings 3 and 4). Not
// read-only: the command list orders dispatches by the buffers they write, and the table
// stands for the blocks written through it.
layout(std430, binding = 1) buffer KT { uvec2 k_blocks[]; };
layout(std430, binding = 2) buffer VT { uvec2 v_blocks[]; };
#define K_WORD_STORE(r, n, at, val) KvWords(k_blocks[(r).x]).w[(r).y * (n) + (at)] = (val)
#define V_WORD_STORE(r, n, at, val) KvWords(v_blocks[(r).x]).w[(r).y * (n) + (at)] = (val)
#define K_SCALE_STORE(r, val) KvHalfs(k_blocks[(r).x]).h[KV_SCALE_BASE(K_FORMAT) + (r).y] = (val)
#define V_SCALE_STORE(r, val) KvHalfs(v_blocks[(r).x]).h[KV_SCALE_BASE(V_FORMAT) + (r).y] = (val)
#else
layout(std430, binding = 1) writeonly buffer KW { uint k_words[]; };          // [n_kv, max_len, head_dim / KV_PER_WORD(K_FORMAT)]
layout(std430, binding = 2) writeonly buffer VW { uint v_words[]; };          // [n_kv, max_len, head_dim / KV_PER_WORD(V_FORMAT)]
layout(std430, binding = 3) writeonly buffer KS { float16_t k_scales[]; };    // [n_kv, max_len]
layout(std430, binding = 4) writeonly buffer VS { float16_t v_scales[]; };    // [n_kv, max_len]
#define K_WORD_STORE(r, n, at, val) k_words[(r) * (n) + (at)] = (val)
#define V_WORD_STORE(r, n, at, val) v_words[(r) * (n) + (at)] = (val)
#define K_SCALE_STORE(r, val) k_scales[r] = (val)
#define V_SCALE_STORE(r, val) v_scales[r] = (val)
#endif
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
    const float16_t scale = float16_t(amax / kv_qmax(f));
    const float inv = float(scale) > 0.0 ? 1.0 / float(scale) : 0.0;
    uint packed = 0;
    const uint per_word = KV_PER_WORD(f);
    for (uint j = 0; j < per_word; ++j) packed |= kv_encode(qkv[src + w * per_word + j] * inv, f) << (j * KV_BITS(f));

    ROW_ENTER(row);
    const kv_row_t cache_row = KV_ROW(head, ROW_POS(row));
    if (is_v) {
        V_WORD_STORE(cache_row, words, w, packed);
        if (w == 0) V_SCALE_STORE(cache_row, scale);
    } else {
        K_WORD_STORE(cache_row, words, w, packed);
        if (w == 0) K_SCALE_STORE(cache_row, scale);
    }
}
