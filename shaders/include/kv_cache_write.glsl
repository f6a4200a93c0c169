// The quantized KV-cache writes (kv_format.glsl), shared by kv_store.comp and by
// attention_split.comp's packing of the step's own row (KV_PACK): writable views of the K and V
// bindings 1 and 2 (the words, or with KV_BLOCKS the block tables, whose blocks are written
// through them: the command list orders dispatches by the bindings they write) and of the row
// scales at KV_K_SCALES_BINDING and KV_V_SCALES_BINDING (with blocks, the scales sit in the
// blocks). A row handle `r` is KV_ROW(head, t) (kv_rows.glsl); `n` is a row's words and `at` a
// word of it. The including kernel defines the scale bindings, and KV_HEADS and KV_HEAD_DIM
// for blocks.
#ifndef AKUNU_KV_CACHE_WRITE_GLSL
#define AKUNU_KV_CACHE_WRITE_GLSL

#include "kv_format.glsl"
#include "kv_rows.glsl"

#ifdef KV_BLOCKS
layout(std430, binding = 1) buffer KTW { uvec2 k_tables_w[]; };  // [blocks] addresses of K blocks
layout(std430, binding = 2) buffer VTW { uvec2 v_tables_w[]; };
#define K_WORD_STORE(r, n, at, val) KvWords(k_tables_w[(r).x]).w[(r).y * (n) + (at)] = (val)
#define V_WORD_STORE(r, n, at, val) KvWords(v_tables_w[(r).x]).w[(r).y * (n) + (at)] = (val)
#define K_SCALE_STORE(r, val) KvHalfs(k_tables_w[(r).x]).h[KV_SCALE_BASE(K_FORMAT) + (r).y] = (val)
#define V_SCALE_STORE(r, val) KvHalfs(v_tables_w[(r).x]).h[KV_SCALE_BASE(V_FORMAT) + (r).y] = (val)
#else
layout(std430, binding = 1) writeonly buffer KW { uint k_words_w[]; };  // [n_kv, rows, head_dim / KV_PER_WORD(K_FORMAT)]
layout(std430, binding = 2) writeonly buffer VW { uint v_words_w[]; };  // [n_kv, rows, head_dim / KV_PER_WORD(V_FORMAT)]
layout(std430, binding = KV_K_SCALES_BINDING) writeonly buffer KSW { float16_t k_scales_w[]; };  // [n_kv, rows]
layout(std430, binding = KV_V_SCALES_BINDING) writeonly buffer VSW { float16_t v_scales_w[]; };  // [n_kv, rows]
#define K_WORD_STORE(r, n, at, val) k_words_w[(r) * (n) + (at)] = (val)
#define V_WORD_STORE(r, n, at, val) v_words_w[(r) * (n) + (at)] = (val)
#define K_SCALE_STORE(r, val) k_scales_w[r] = (val)
#define V_SCALE_STORE(r, val) v_scales_w[r] = (val)
#endif

// A row's scale from its max |x|, rounded to a half's value (f16_round): the codes are formed
// with it, and the cache stores it as a half, exactly.
float kv_row_scale(float amax, uint f) { return f16_round(amax / kv_qmax(f)); }
// The factor that forms a code's argument from a value: 0 for a row of zeros.
float kv_inverse(float scale) { return scale > 0.0 ? 1.0 / scale : 0.0; }

#endif
