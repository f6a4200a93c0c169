// The query rows of a flash attention workgroup (flash_attention.comp, flash_cm.comp): up to
// `block_rows` consecutive rows of the step, row `first` the block's first, `rows` of them live,
// the first at position `pos` and each next one position on.
//
//   a prefill chunk  block gl_WorkGroupID.x of the chunk's rows, the chunk's rows at step.pos on.
//   KV_BATCH         tile gl_WorkGroupID.x of the batched step's tile list (params.h BatchTile,
//                    binding 5): a run of one sequence's rows, whose blocks KV_ROW then reads
//                    (ROW_ENTER, kv_rows.glsl).
// The including kernel declares `p` (FlashAttentionParams) and the step binding (STEP_BLOCK).
#ifndef AKUNU_QUERY_BLOCK_GLSL
#define AKUNU_QUERY_BLOCK_GLSL

struct QueryBlock {
    uint first, rows, pos;
};

#ifdef KV_BATCH
layout(std430, binding = 5) readonly buffer Tiles { BatchTile batch_tiles[]; };
QueryBlock query_block(uint block_rows) {
    const BatchTile t = batch_tiles[gl_WorkGroupID.x];
    const uint n = min(p.rows, step.n_tokens);
    if (t.rows == 0 || t.first_row >= n) return QueryBlock(0, 0, 0);  // rows stay inside the step
    ROW_ENTER(t.first_row);
    return QueryBlock(t.first_row, min(min(t.rows, block_rows), n - t.first_row), ROW_POS(t.first_row));
}
#else
QueryBlock query_block(uint block_rows) {
    const uint n = min(p.rows, step.n_tokens), first = gl_WorkGroupID.x * block_rows;
    return QueryBlock(first, first < n ? min(block_rows, n - first) : 0, step.pos + first);
}
#endif

// The first key a block stages, from `first`, its first row's first visible key: in a batched
// step the key tile below it, so that a row's keys fall into the same tiles of `key_tile` keys
// (and sum in the same order) wherever its block starts, and a prompt's piece gives the same
// results whole or cut between micro-batches. The keys before `first` are masked.
uint block_keys_begin(uint first, uint key_tile) {
#ifdef KV_BATCH
    return first / key_tile * key_tile;
#else
    return first;
#endif
}

#endif
