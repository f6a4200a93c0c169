#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
// flash_attention: causal attention for a prefill chunk, one pass over the cache with an
// online softmax (no [rows, keys] score matrix is ever stored).
//
// Workgroup = (block of AKUNU_FLASH_ROWS query rows, one query head). Each query row has a
// team of 8 neighbouring invocations (inside one subgroup on every device: subgroups hold 8,
// 32 or 64); invocation `lane` of the team owns head_dim / 8 contiguous dims of q and of the
// output. Keys come in tiles of AKUNU_FLASH_KEYS rows staged in shared memory as f16, as the
// cache stores them; a quantized cache (KV_* define, kv_format.glsl) stages its codes, which
// f16 holds exactly, and each row's scale beside them; a ring or a cache in blocks (KV_RING,
// KV_BLOCKS: kv_rows.glsl) is staged row by row. A team scores 8 keys at a time and reduces
// the 8 partial sums of each lane in one transposing pass (7 shuffles for 8 keys).
// KV_BATCH: the workgroup's rows are a tile of a batched step, a run of one sequence's rows
// (query_block.glsl), in that sequence's blocks.
#include "common.glsl"
#define KV_HEAD_DIM p.a.head_dim
#define KV_ROWS p.a.cache_rows
#define KV_HEADS p.a.n_kv_heads
#include "kv_cache_read.glsl"

#define TEAM 8
// head_dim / TEAM, a specialization constant so that every per-lane loop has a fixed trip
// count and q and the output accumulators stay in registers. Lane `lane` of a team owns the
// contiguous dims lane * SLICE .. lane * SLICE + SLICE - 1 of q and of the output.
layout(constant_id = 0) const uint SLICE = 16;
// Where SLICE is a multiple of 8 (head_dim 64, 128, 192, 256) a lane reads its dims of a staged
// row as 16-byte vectors; otherwise one half at a time.
const bool VEC = SLICE % 8 == 0;
layout(local_size_x = AKUNU_FLASH_ROWS * TEAM) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };            // [rows, q_stride]
layout(std430, binding = 3) writeonly buffer O { float out_data[]; };    // [rows, out_stride]
layout(std430, binding = 4) readonly buffer Step { STEP_BLOCK };
layout(push_constant) uniform Push { FlashAttentionParams p; };
#define KV_PARAMS p.a
#define KV_STEP_POS step.pos
#include "kv_recent.glsl"
#include "query_block.glsl"
#if !defined(KV_QUANTIZED) && !defined(KV_RING) && !defined(KV_BLOCKS)
layout(std430, binding = 1) readonly buffer K8 { uvec4 k_cache8[]; };   // the f16 cache, 8 halves at a time
layout(std430, binding = 2) readonly buffer V8 { uvec4 v_cache8[]; };
#endif

// Staged rows of K and V, 8 halves per uvec4 (head_dim is a multiple of 8).
shared uvec4 k_tile[AKUNU_FLASH_KEYS * AKUNU_FLASH_MAX_HEAD_DIM / 8];
shared uvec4 v_tile[AKUNU_FLASH_KEYS * AKUNU_FLASH_MAX_HEAD_DIM / 8];
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

// Half `i` of a staged tile, one at a time (the path for SLICE not a multiple of 8).
#define TILE_HALF(tile, i) unpackHalf2x16(tile[(i) / 8][((i) / 2) % 4])[(i) % 2]

// The dot product of qv with this lane's slice of a staged K row, whose slice starts at half
// `first` of the tile.
float slice_dot(uint first, float qv[SLICE]) {
    float d = 0.0;
    if (VEC) {
        [[unroll]] for (uint c = 0; c < SLICE / 8; ++c) {
            const uvec4 h = k_tile[first / 8 + c];
            [[unroll]] for (uint e = 0; e < 4; ++e) {
                const vec2 f = unpackHalf2x16(h[e]);
                d += qv[8 * c + 2 * e] * f.x + qv[8 * c + 2 * e + 1] * f.y;
            }
        }
    } else {
        [[unroll]] for (uint i = 0; i < SLICE; ++i) d += qv[i] * TILE_HALF(k_tile, first + i);
    }
    return d;
}

void main() {
    const QueryBlock qb = query_block(AKUNU_FLASH_ROWS);
    const uint h = gl_WorkGroupID.y;
    if (qb.rows == 0) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x, lane = tid % TEAM;
    const uint team_base = gl_SubgroupInvocationID & ~(TEAM - 1u);  // the team's first lane
    const uint local = tid / TEAM, row = qb.first + local;
    const bool live = local < qb.rows;
    const uint pos = qb.pos + local;
    const uint kvh = h / (p.a.n_heads / p.a.n_kv_heads);
    const uint hd = SLICE * TEAM;

    float qv[SLICE], o[SLICE];
    [[unroll]] for (uint i = 0; i < SLICE; ++i) {
        qv[i] = live ? q[row * p.q_stride + h * hd + lane * SLICE + i] : 0.0;
        o[i] = 0.0;
    }
    // The running max is the team's; the running sum of weights is this lane's share (its own
    // keys), summed over the team at the end.
    float m = -1.0 / 0.0, l = 0.0;

    // Keys any row of the block sees: from the first row's window start to the last row.
    const uint key_begin = block_keys_begin(first_key(qb.pos), AKUNU_FLASH_KEYS), key_end = qb.pos + qb.rows;
    const uint my_first = first_key(pos);
    for (uint t0 = key_begin; t0 < key_end; t0 += AKUNU_FLASH_KEYS) {
        const uint tile = min(AKUNU_FLASH_KEYS, key_end - t0);
        for (uint e = tid; e < tile * hd / 8; e += gl_WorkGroupSize.x) {
#if defined(KV_QUANTIZED) || defined(KV_RING) || defined(KV_BLOCKS)
            const kv_row_t r = KV_ROW(kvh, t0 + e / (hd / 8));
            const uint i = 8 * (e % (hd / 8));
            uvec4 kh, vh;
            [[unroll]] for (uint c = 0; c < 4; ++c) {
                kh[c] = packHalf2x16(vec2(K_AT(r, i + 2 * c), K_AT(r, i + 2 * c + 1)));
                vh[c] = packHalf2x16(vec2(V_AT(r, i + 2 * c), V_AT(r, i + 2 * c + 1)));
            }
            k_tile[e] = kh;
            v_tile[e] = vh;
#else
            const uint at = (kvh * KV_ROWS + t0) * (hd / 8) + e;
            k_tile[e] = k_cache8[at];
            v_tile[e] = v_cache8[at];
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

        // Keys in groups of TEAM: each lane takes partial dot products of all the group's keys
        // over its dims, then a transposing reduction (4 + 2 + 1 shuffles) leaves lane j with
        // the whole score of key j; softmax weights are computed once per key, by its lane.
        for (uint j0 = 0; j0 < tile; j0 += TEAM) {
            float part[TEAM];
            [[unroll]] for (uint j = 0; j < TEAM; ++j) part[j] = slice_dot((j0 + j) * hd + lane * SLICE, qv);
            [[unroll]] for (uint half_n = TEAM / 2; half_n >= 1; half_n /= 2) {
                const bool upper = (lane & half_n) != 0;
                [[unroll]] for (uint j = 0; j < half_n; ++j) {
                    const float keep = upper ? part[j + half_n] : part[j];
                    const float send = upper ? part[j] : part[j + half_n];
                    part[j] = keep + subgroupShuffleXor(send, half_n);
                }
            }
            const uint j = j0 + lane, key = t0 + j;
            float s = part[0] * p.a.scale * (j < tile ? K_TILE_SCALE(j) : 1.0);
            if (p.a.softcap > 0.0) s = p.a.softcap * tanh(s / p.a.softcap);
            s = live && j < tile && key >= my_first && key <= pos && !KV_IS_RECENT(key, pos) ? s : -1.0 / 0.0;
            float group_max = max(s, subgroupShuffleXor(s, 4));
            group_max = max(group_max, subgroupShuffleXor(group_max, 2));
            group_max = max(group_max, subgroupShuffleXor(group_max, 1));
            const float m_new = max(m, group_max);
            // With no visible key yet (m_new = -inf) every weight and correction is 0.
            const float m_ref = m_new > -1.0 / 0.0 ? m_new : 0.0;
            const float correction = exp(m - m_ref), w = exp(s - m_ref);
            m = m_new;
            l = l * correction + w;
            [[unroll]] for (uint i = 0; i < SLICE; ++i) o[i] *= correction;
            const float wv = w * (j < tile ? V_TILE_SCALE(j) : 0.0);
            const uint group = min(TEAM, tile - j0);  // uniform: keys past the tile are not read
            for (uint g = 0; g < group; ++g) {
                const float wg = subgroupShuffle(wv, team_base + g);
                const uint first = (j0 + g) * hd + lane * SLICE;
                if (VEC) {
                    [[unroll]] for (uint c = 0; c < SLICE / 8; ++c) {
                        const uvec4 hv = v_tile[first / 8 + c];
                        [[unroll]] for (uint e = 0; e < 4; ++e) {
                            const vec2 f = unpackHalf2x16(hv[e]);
                            o[8 * c + 2 * e] += wg * f.x;
                            o[8 * c + 2 * e + 1] += wg * f.y;
                        }
                    }
                } else {
                    [[unroll]] for (uint i = 0; i < SLICE; ++i) o[i] += wg * TILE_HALF(v_tile, first + i);
                }
            }
        }
        barrier();
    }

#ifdef KV_RECENT
    // The window's keys, pos + 1 - recent .. pos, from their f16 copies, one key at a time for
    // the whole team (the same trip count for every row, so the shuffles stay uniform); lane 0
    // counts each key's weight in the team's sum.
    for (uint j = 0; j < p.a.recent; ++j) {
        const bool see = live && pos + j + 1 >= p.a.recent && pos + j + 1 - p.a.recent >= my_first;
        const uint key = see ? pos + j + 1 - p.a.recent : step.pos;  // a row the step holds
        float d = 0.0;
        [[unroll]] for (uint i = 0; i < SLICE; ++i) d += qv[i] * K_RECENT(kvh, key, lane * SLICE + i);
        d += subgroupShuffleXor(d, 4);
        d += subgroupShuffleXor(d, 2);
        d += subgroupShuffleXor(d, 1);
        float s = d * p.a.scale;
        if (p.a.softcap > 0.0) s = p.a.softcap * tanh(s / p.a.softcap);
        s = see ? s : -1.0 / 0.0;
        const float m_new = max(m, s), m_ref = m_new > -1.0 / 0.0 ? m_new : 0.0;
        const float correction = exp(m - m_ref), w = exp(s - m_ref);
        m = m_new;
        l = l * correction + (lane == 0 ? w : 0.0);
        [[unroll]] for (uint i = 0; i < SLICE; ++i)
            o[i] = o[i] * correction + (see ? w * V_RECENT(kvh, key, lane * SLICE + i) : 0.0);
    }
#endif
    l += subgroupShuffleXor(l, 4);
    l += subgroupShuffleXor(l, 2);
    l += subgroupShuffleXor(l, 1);
    if (live)
        [[unroll]] for (uint i = 0; i < SLICE; ++i) out_data[row * p.out_stride + h * hd + lane * SLICE + i] = o[i] / l;
}
