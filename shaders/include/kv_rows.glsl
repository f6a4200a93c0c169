// Where a KV-cache row lives, shared by the cache readers (kv_cache_read.glsl) and writers
// (rope_kv.comp, kv_store.comp). A row is one (KV head, position t): head_dim values, or a
// quantized format's packed words and its scale. KV_ROW(head, t) gives a row handle of type
// kv_row_t; the K_AT/V_AT/K_SCALE/V_SCALE reads and the writers' stores take that handle.
//
//   (default)  one buffer per side, [n_kv, KV_ROWS, ...]: row = head * KV_ROWS + t
//   KV_RING    the same buffer as a ring of KV_ROWS positions (sliding-window layers):
//              row = head * KV_ROWS + t % KV_ROWS
//   KV_BLOCKS  blocks of AKUNU_KV_BLOCK positions allocated as the sequence grows, each side of
//              a block [n_kv, AKUNU_KV_BLOCK, ...] (quantized: the words, then the scales
//              [n_kv, AKUNU_KV_BLOCK] f16 right after them), found through a table of device
//              addresses [blocks] that the host fills when it allocates a block. The table
//              bindings stand where the K and V buffers stand otherwise. The handle is
//              uvec2(block, head * AKUNU_KV_BLOCK + t % AKUNU_KV_BLOCK).
//
// The including kernel defines KV_ROWS (cache rows per head) and, for blocks, KV_HEADS
// (n_kv_heads) and KV_HEAD_DIM.
#ifndef AKUNU_KV_ROWS_GLSL
#define AKUNU_KV_ROWS_GLSL

// KV_BATCH (with KV_BLOCKS): a batched step's rows belong to different sequences, each with its
// own block table of KV_SEQ_BLOCKS entries, the tables of all sequences side by side in the
// binding. The step binding holds the StepState, then a BatchRow per row (params.h):
// STEP_BLOCK declares it, ROW_POS(row) is a row's position, and ROW_ENTER(row) points KV_ROW at
// the row's sequence. Without KV_BATCH, row r of a step sits at step.pos + r of the one sequence.
#ifdef KV_BATCH
#define KV_SEQ_BLOCKS ((KV_ROWS + AKUNU_KV_BLOCK - 1u) / AKUNU_KV_BLOCK)
uint kv_seq_block = 0u;  // the first table entry of the current row's sequence
#define STEP_BLOCK StepState step; BatchRow batch_rows[];
#define ROW_POS(row) batch_rows[row].pos
#define ROW_ENTER(row) kv_seq_block = batch_rows[row].seq * KV_SEQ_BLOCKS
#define KV_BLOCK_OF(t) (kv_seq_block + (t) / AKUNU_KV_BLOCK)
#else
#define STEP_BLOCK StepState step;
#define ROW_POS(row) (step.pos + (row))
#define ROW_ENTER(row)
#define KV_BLOCK_OF(t) ((t) / AKUNU_KV_BLOCK)
#endif

#ifdef KV_BLOCKS
layout(buffer_reference, std430, buffer_reference_align = 2) buffer KvHalfs { float16_t h[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer KvWords { uint w[]; };
#define kv_row_t uvec2
#define KV_ROW(head, t) uvec2(KV_BLOCK_OF(t), (head) * AKUNU_KV_BLOCK + (t) % AKUNU_KV_BLOCK)
// f16 index of a quantized side's first scale inside its block: the words come first.
#define KV_SCALE_BASE(f) (KV_HEADS * AKUNU_KV_BLOCK * (KV_HEAD_DIM / KV_PER_WORD(f)) * 2u)
#elif defined(KV_RING)
#define kv_row_t uint
#define KV_ROW(head, t) ((head) * KV_ROWS + (t) % KV_ROWS)
#else
#define kv_row_t uint
#define KV_ROW(head, t) ((head) * KV_ROWS + (t))
#endif

#endif
