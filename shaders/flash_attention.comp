#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
// flash_attention: causal attention for a prefill chunk, one pass over the cache with an
// online softmax (no [rows, keys] score matrix is ever stored).
//
// Workgroup = (block of AKUNU_FLASH_ROWS query rows, one query head). Each query row has a
// team of 8 neighbouring invocations (inside one subgroup on every device: subgroups hold 8,
// 32 or 64); invocation `lane` of the team owns dims lane, lane + 8, ... of q and of the
// output. Keys come in tiles of AKUNU_FLASH_KEYS rows staged in shared memory as f16, as the
// cache stores them; a quantized cache (KV_* define, kv_format.glsl) stages its codes, which
// f16 holds exactly, and each row's scale beside them; a ring or a cache in blocks (KV_RING,
// KV_BLOCKS: kv_rows.glsl) is staged row by row. Scores are summed across the team with three
// shuffles.
#include "common.glsl"
#define KV_HEAD_DIM p.a.head_dim
#define KV_ROWS p.a.cache_rows
#define KV_HEADS p.a.n_kv_heads
#include "kv_cache_read.glsl"

#define TEAM 8
// head_dim / TEAM, a specialization constant so that every per-lane loop has a fixed trip
// count and q and the output accumulators stay in registers.
layout(constant_id = 0) const uint SLICE = 16;
layout(local_size_x = AKUNU_FLASH_ROWS * TEAM) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };            // [rows, q_stride]
layout(std430, binding = 3) writeonly buffer O { float out_data[]; };    // [rows, out_stride]
layout(std430, binding = 4) readonly buffer Step { StepState step; };
layout(push_constant) uniform Push { FlashAttentionParams p; };

shared float16_t k_tile[AKUNU_FLASH_KEYS * AKUNU_FLASH_MAX_HEAD_DIM];
shared float16_t v_tile[AKUNU_FLASH_KEYS * AKUNU_FLASH_MAX_HEAD_DIM];
#ifdef KV_QUANTIZED
shared float k_scale_tile[AKUNU_FLASH_KEYS], v_scale_tile[AKUNU_FLASH_KEYS];
#define K_TILE_SCALE(j) k_scale_tile[j]
#define V_TILE_SCALE(j) v_scale_tile[j]
#else
#define K_TILE_SCALE(j) 1.0
#define V_TILE_SCALE(j) 1.0
#endif

// The first cache row a query at `pos` sees.
uint first_key(uint pos) { return p.a.window > 0 && pos + 1 > p.a.window ? pos + 1 - p.a.window : 0; }

void main() {
    const uint n = min(p.rows, step.n_tokens);
    const uint block = gl_WorkGroupID.x * AKUNU_FLASH_ROWS, h = gl_WorkGroupID.y;
    if (block >= n) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x, lane = tid % TEAM;
    const uint row = block + tid / TEAM;
    const bool live = row < n;
    const uint pos = step.pos + row;
    const uint kvh = h / (p.a.n_heads / p.a.n_kv_heads);
    const uint hd = SLICE * TEAM;

    float qv[SLICE], o[SLICE];
    for (uint i = 0; i < SLICE; ++i) {
        qv[i] = live ? q[row * p.q_stride + h * hd + lane + i * TEAM] : 0.0;
        o[i] = 0.0;
    }
    float m = -1.0 / 0.0, l = 0.0;

    // Keys any row of the block sees: from the first row's window start to the last row.
    const uint last_row = min(block + AKUNU_FLASH_ROWS, n) - 1;
    const uint key_begin = first_key(step.pos + block), key_end = step.pos + last_row + 1;
    const uint my_first = first_key(pos);
    for (uint t0 = key_begin; t0 < key_end; t0 += AKUNU_FLASH_KEYS) {
        const uint tile = min(AKUNU_FLASH_KEYS, key_end - t0);
        for (uint e = tid; e < tile * hd; e += gl_WorkGroupSize.x) {
#if defined(KV_QUANTIZED) || defined(KV_RING) || defined(KV_BLOCKS)
            const kv_row_t r = KV_ROW(kvh, t0 + e / hd);
            const uint i = e % hd;
            k_tile[e] = float16_t(K_AT(r, i));
            v_tile[e] = float16_t(V_AT(r, i));
#else
            const uint at = (kvh * KV_ROWS + t0) * hd + e;
            k_tile[e] = k_cache[at];
            v_tile[e] = v_cache[at];
#endif
        }
#ifdef KV_QUANTIZED
        if (tid < tile) {
            const kv_row_t r = KV_ROW(kvh, t0 + tid);
            k_scale_tile[tid] = K_SCALE(r);
            v_scale_tile[tid] = V_SCALE(r);
        }
#endif
        barrier();

        float s[AKUNU_FLASH_KEYS];
        float tile_max = -1.0 / 0.0;
        for (uint j = 0; j < AKUNU_FLASH_KEYS; ++j) {
            float d = 0.0;
            if (j < tile)
                for (uint i = 0; i < SLICE; ++i) d += qv[i] * float(k_tile[j * hd + lane + i * TEAM]);
            d += subgroupShuffleXor(d, 4);
            d += subgroupShuffleXor(d, 2);
            d += subgroupShuffleXor(d, 1);
            d *= p.a.scale * (j < tile ? K_TILE_SCALE(j) : 1.0);
            if (p.a.softcap > 0.0) d = p.a.softcap * tanh(d / p.a.softcap);
            const uint key = t0 + j;
            s[j] = live && j < tile && key >= my_first && key <= pos ? d : -1.0 / 0.0;
            tile_max = max(tile_max, s[j]);
        }
        const float m_new = max(m, tile_max);
        if (m_new > -1.0 / 0.0) {  // some key of this tile is visible to this row
            const float correction = exp(m - m_new);
            l *= correction;
            for (uint i = 0; i < SLICE; ++i) o[i] *= correction;
            for (uint j = 0; j < tile; ++j) {
                const float w = exp(s[j] - m_new);
                l += w;
                const float wv = w * V_TILE_SCALE(j);
                for (uint i = 0; i < SLICE; ++i) o[i] += wv * float(v_tile[j * hd + lane + i * TEAM]);
            }
            m = m_new;
        }
        barrier();
    }

    if (live)
        for (uint i = 0; i < SLICE; ++i) out_data[row * p.out_stride + h * hd + lane + i * TEAM] = o[i] / l;
}
