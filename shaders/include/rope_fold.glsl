// rope_kv's work for the step's token, folded into a decode step's Q/K/V GEMV (gemv_tiles.comp
// and gemv_parts.comp, with p.rope_head_dim > 0; otherwise other buffers stand in for
// bindings 8 to 12, unread). A RoPE pair's rows (2 f, 2 f + 1; or f, f + head_dim / 2 with
// p.rope_half_split, where gemv_parts.comp orders its rows by rope_row) end in neighbouring
// invocations of one workgroup, which swap their totals by a shuffle (rope_partner) and rotate
// them with row step.pos of the tables; K and V rows also go to the f16 cache as they are written
// (built with KV_BLOCKS: to its blocks; with KV_BATCH too, to those of a batch's one row). With
// p.rope_cache_rows = 0 only RoPE is folded: a quantized cache's rows are packed by kv_write after.
#ifndef AKUNU_ROPE_FOLD_GLSL
#define AKUNU_ROPE_FOLD_GLSL
#extension GL_KHR_shader_subgroup_shuffle : require

layout(std430, binding = 8) readonly buffer Cos { float cos_t[]; };         // [positions, head_dim / 2]
layout(std430, binding = 9) readonly buffer Sin { float sin_t[]; };
#ifdef KV_BLOCKS
// A cache in blocks (the _blocks variants: KV_BLOCKS), or a batch's pool (the _batch variants:
// KV_BLOCKS, KV_BATCH), whose one-row step's row goes to its own sequence's blocks at its own
// position (kv_rows.glsl): through the block tables, which stand where the caches stand
// otherwise (as in rope_kv.comp: not read-only, so that the command list orders the attention
// that reads the blocks after this write).
#define KV_ROWS p.rope_cache_rows
#include "kv_rows.glsl"
layout(std430, binding = 10) buffer KT { uvec2 k_blocks[]; };
layout(std430, binding = 11) buffer VT { uvec2 v_blocks[]; };
layout(std430, binding = 12) readonly buffer Step { STEP_BLOCK };
#define ROPE_POS ROW_POS(0)
#else
layout(std430, binding = 10) writeonly buffer KC { float16_t k_cache[]; };  // [n_kv, cache_rows, head_dim]
layout(std430, binding = 11) writeonly buffer VC { float16_t v_cache[]; };
layout(std430, binding = 12) readonly buffer Step { StepState step; };
#define ROPE_POS step.pos
#endif

// The row of Q or K that a workgroup's i-th row of a head is: with half-split pairs, rows
// (f, f + head_dim / 2) become neighbours 2 f and 2 f + 1, so that one workgroup holds both.
uint rope_row(uint part, uint i) {
    if (p.rope_half_split == 0 || part == 2) return i;
    const uint head = i / p.rope_head_dim, d = i % p.rope_head_dim;
    return head * p.rope_head_dim + d / 2 + (d % 2) * (p.rope_head_dim / 2);
}

// The total of the other row of this invocation's RoPE pair. Called by every invocation that
// holds a row total, before rows past the matrix leave (they come in whole pairs).
float rope_partner(float total) { return p.rope_head_dim > 0 ? subgroupShuffleXor(total, 1) : 0.0; }

// Row `row` of matrix `part` (0: Q, 1: K, 2: V) with its total and its partner's: Q and K rows
// rotated, K and V rows stored to the cache row of step.pos. Returns what y gets.
float rope_fold(uint part, uint row, float total, float other) {
    if (p.rope_head_dim == 0) return total;
    const uint half_dim = p.rope_head_dim / 2, head = row / p.rope_head_dim, d = row % p.rope_head_dim, pos = ROPE_POS;
    if (part < 2) {
        const bool first = p.rope_half_split != 0 ? d < half_dim : d % 2 == 0;  // x_f of the pair
        const uint f = p.rope_half_split != 0 ? d % half_dim : d / 2;
        const float c = cos_t[pos * half_dim + f], s = sin_t[pos * half_dim + f];
        total = first ? total * c - other * s : other * s + total * c;
    }
    if (p.rope_cache_rows == 0u) return total;
#ifdef KV_BLOCKS
    ROW_ENTER(0);
    const kv_row_t r = KV_ROW(head, pos);
    if (part == 1) KvHalfs(k_blocks[r.x]).h[r.y * p.rope_head_dim + d] = float16_t(total);
    if (part == 2) KvHalfs(v_blocks[r.x]).h[r.y * p.rope_head_dim + d] = float16_t(total);
#else
    const uint at = (head * p.rope_cache_rows + pos % p.rope_cache_rows) * p.rope_head_dim + d;
    if (part == 1) k_cache[at] = float16_t(total);
    if (part == 2) v_cache[at] = float16_t(total);
#endif
    return total;
}
#endif
