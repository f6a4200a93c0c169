// The K and V cache bindings (1 and 2, and for quantized formats their scales at 5 and 6) of
// the attention kernels, and the reads they share. `r` is a row handle, KV_ROW(head, t)
// (kv_rows.glsl); `i` a dimension. K_AT/V_AT are the values without the row scale (a quantized
// format's codes, which f16 holds exactly), K_SCALE/V_SCALE the row scales (1 for f16):
// kernels fold a scale into a dot product or a weight instead of multiplying every element.
// With KV_BLOCKS, bindings 1 and 2 are the K and V block tables and there are no scale
// bindings (the scales sit in the blocks).
// The including kernel defines KV_HEAD_DIM, KV_ROWS and KV_HEADS from its parameters.
#ifndef AKUNU_KV_CACHE_READ_GLSL
#define AKUNU_KV_CACHE_READ_GLSL

#include "kv_format.glsl"
#include "kv_rows.glsl"

#ifdef KV_BLOCKS
layout(std430, binding = 1) readonly buffer KT { uvec2 k_blocks[]; };     // [blocks] addresses of K blocks
layout(std430, binding = 2) readonly buffer VT { uvec2 v_blocks[]; };     // [blocks] addresses of V blocks
#ifdef KV_QUANTIZED
#define KV_WORD_AT(table, f, r, i) \
    kv_code(KvWords(table[(r).x]).w[(r).y * (KV_HEAD_DIM / KV_PER_WORD(f)) + (i) / KV_PER_WORD(f)], (i) % KV_PER_WORD(f), f)
#define K_AT(r, i) KV_WORD_AT(k_blocks, K_FORMAT, r, i)
#define V_AT(r, i) KV_WORD_AT(v_blocks, V_FORMAT, r, i)
#define K_SCALE(r) float(KvHalfs(k_blocks[(r).x]).h[KV_SCALE_BASE(K_FORMAT) + (r).y])
#define V_SCALE(r) float(KvHalfs(v_blocks[(r).x]).h[KV_SCALE_BASE(V_FORMAT) + (r).y])
#else
#define K_AT(r, i) float(KvHalfs(k_blocks[(r).x]).h[(r).y * KV_HEAD_DIM + (i)])
#define V_AT(r, i) float(KvHalfs(v_blocks[(r).x]).h[(r).y * KV_HEAD_DIM + (i)])
#define K_SCALE(r) 1.0
#define V_SCALE(r) 1.0
#endif
#elif defined(KV_QUANTIZED)
layout(std430, binding = 1) readonly buffer K { uint k_words[]; };        // [n_kv, rows, head_dim / KV_PER_WORD(K_FORMAT)]
layout(std430, binding = 2) readonly buffer V { uint v_words[]; };        // [n_kv, rows, head_dim / KV_PER_WORD(V_FORMAT)]
layout(std430, binding = 5) readonly buffer KS { float16_t k_scales[]; }; // [n_kv, rows]
layout(std430, binding = 6) readonly buffer VS { float16_t v_scales[]; }; // [n_kv, rows]
#define KV_WORD_AT(words, f, row, i) \
    kv_code(words[(row) * (KV_HEAD_DIM / KV_PER_WORD(f)) + (i) / KV_PER_WORD(f)], (i) % KV_PER_WORD(f), f)
#define K_AT(row, i) KV_WORD_AT(k_words, K_FORMAT, row, i)
#define V_AT(row, i) KV_WORD_AT(v_words, V_FORMAT, row, i)
#define K_SCALE(row) float(k_scales[row])
#define V_SCALE(row) float(v_scales[row])
#else
layout(std430, binding = 1) readonly buffer K { float16_t k_cache[]; };   // [n_kv, rows, head_dim]
layout(std430, binding = 2) readonly buffer V { float16_t v_cache[]; };   // [n_kv, rows, head_dim]
#define K_AT(row, i) float(k_cache[(row) * KV_HEAD_DIM + (i)])
#define V_AT(row, i) float(v_cache[(row) * KV_HEAD_DIM + (i)])
#define K_SCALE(row) 1.0
#define V_SCALE(row) 1.0
#endif

#endif
