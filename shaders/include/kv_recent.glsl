// The recent window of a quantized cache (kv_format.h, "recent window"): a query at position
// pos reads the keys and values at positions t > pos - recent from f16 copies instead of the
// cache's codes. The step's own rows (t >= step.pos) come from its f32 [q | k | v] rows (after
// RoPE and, for int4h, the rotation), rounded to f16 as the ring stores them; older ones from a
// ring of recent_rows rows per KV head, position t in row t % recent_rows, which kv_recent_store
// fills after attention. Without KV_RECENT every key is read from the cache (KV_IS_RECENT is
// false and the branches fold away).
//
// Bindings 9 to 11, after every other binding of the including kernel, which defines
// KV_PARAMS (its AttentionParams) and KV_STEP_POS (the step's first position) and includes
// this after its push constants and step binding. A batched step's kernel (engine/batch.h)
// also defines KV_STEP_ROW0 (the step row of the query's sequence's first position this
// step, KV_STEP_POS) and KV_RING_SEQ (its sequence: the rings hold [sequences, n_kv, ...]).
#ifndef AKUNU_KV_RECENT_GLSL
#define AKUNU_KV_RECENT_GLSL

#ifndef KV_STEP_ROW0
#define KV_STEP_ROW0 0u
#endif
#ifndef KV_RING_SEQ
#define KV_RING_SEQ 0u
#endif

#ifdef KV_RECENT
layout(std430, binding = 9) readonly buffer StepRows { float step_rows[]; };  // [rows, kv_stride] of [q | k | v]
layout(std430, binding = 10) readonly buffer KR { float16_t k_recent[]; };    // [(sequences,) n_kv, recent_rows, head_dim]
layout(std430, binding = 11) readonly buffer VR { float16_t v_recent[]; };    // as k_recent

#define KV_IS_RECENT(t, pos) ((t) + KV_PARAMS.recent > (pos))

// Dim i of key (values = false) or value t of KV head kvh, from its f16 copy.
float kv_recent_at(bool values, uint kvh, uint t, uint i) {
    const uint hd = KV_PARAMS.head_dim;
    if (t >= KV_STEP_POS) {
        const uint kv_dim = KV_PARAMS.n_kv_heads * hd;
        const uint at = (KV_STEP_ROW0 + t - KV_STEP_POS) * KV_PARAMS.kv_stride + KV_PARAMS.n_heads * hd + (values ? kv_dim : 0u);
        return f16_round(step_rows[at + kvh * hd + i]);
    }
    const uint at = ((KV_RING_SEQ * KV_PARAMS.n_kv_heads + kvh) * KV_PARAMS.recent_rows + t % KV_PARAMS.recent_rows) * hd + i;
    return values ? float(v_recent[at]) : float(k_recent[at]);
}
#define K_RECENT(kvh, t, i) kv_recent_at(false, kvh, t, i)
#define V_RECENT(kvh, t, i) kv_recent_at(true, kvh, t, i)
#else
#define KV_IS_RECENT(t, pos) false
#define K_RECENT(kvh, t, i) 0.0
#define V_RECENT(kvh, t, i) 0.0
#endif

#endif
