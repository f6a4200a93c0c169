#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
// flash_cm_d<HD>: causal attention for a prefill chunk on NV cooperative matrices (f16
// products, f32 accumulation), for an f16 cache in one buffer and head_dim HD (64 or 128);
// flash_attention.comp is the same attention on scalar FMAs, and takes every other cache.
//
// Workgroup = (block of AKUNU_FLASH_CM_ROWS query rows, one query head): 4 subgroups of 32,
// 16 rows each. Keys come in tiles of BK rows staged in shared memory, the next tile's loads
// in flight while this one's products run. Two passes over the
// keys: the first forms each row's maximum score, the second its weights exp(s - max) as f16,
// their sum, and the weighted V sum in accumulators. Knowing the maximum up front means the
// accumulators never need rescaling, which cooperative matrices cannot do by row (their
// element layout is the driver's); the price is the scores computed twice, a third more
// products than one online-softmax pass.
//
// Q is read once, scaled by p.a.scale and rounded to f16, as the prefill GEMMs round their X.
// OTYPE float16_t writes the output as halves: the X of the O projection's GEMM where it takes
// them (flash_cm_d<HD>_f16).
// KV_BLOCKS,KV_BATCH (flash_cm_d<HD>_batch): the rows are a tile of a batched step, a run of one
// sequence's rows (query_block.glsl), and K and V are that sequence's f16 blocks of a pool,
// reached through the block tables at bindings 1 and 2 (kv_rows.glsl).
// Scores and the output leave the accumulators through a 16-row tile per subgroup in shared
// memory, where each row belongs to two lanes (16 keys or 8 dims each).
#include "common.glsl"
#ifndef OTYPE
#define OTYPE float
#endif

#define SG 4               // subgroups per workgroup
#define BQ (SG * 16)       // query rows per workgroup: AKUNU_FLASH_CM_ROWS
#define BK 32              // keys per staged tile
#define DB (HD / 16)       // 16-wide blocks of a head
#define PITCH (HD + 8)     // halves per staged Q, K or V row: 16 bytes of padding against bank conflicts
#define PITCH8 (PITCH / 8)
#define SP (BK + 4)        // floats per row of a subgroup's score tile (a multiple of 4: 16-byte rows)
#define PP (BK + 8)        // halves per row of a subgroup's weight tile
#define PP8 (PP / 8)
#if BQ != AKUNU_FLASH_CM_ROWS || (HD != 64 && HD != 128)
#error "flash_cm: 4 subgroups of 16 rows, head_dim 64 or 128"
#endif

layout(local_size_x = SG * 32) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [rows, q_stride]
layout(std430, binding = 3) writeonly buffer O { OTYPE out_data[]; };  // [rows, out_stride]
layout(push_constant) uniform Push { FlashAttentionParams p; };
#define KV_HEAD_DIM HD
#define KV_ROWS p.a.cache_rows
#define KV_HEADS p.a.n_kv_heads
#include "kv_rows.glsl"
layout(std430, binding = 4) readonly buffer Step { STEP_BLOCK };
#include "query_block.glsl"
// Eight halves e of the K or V row (KV head, key t) at a time.
#ifdef KV_BLOCKS
layout(std430, binding = 1) readonly buffer KT { uvec2 k_blocks[]; };  // [blocks] addresses of K blocks
layout(std430, binding = 2) readonly buffer VT { uvec2 v_blocks[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer KvOctets { uvec4 o[]; };
#define ROW8(table, kvh, t, e) KvOctets(table[KV_ROW(kvh, t).x]).o[KV_ROW(kvh, t).y * (HD / 8) + (e)]
#define K8(kvh, t, e) ROW8(k_blocks, kvh, t, e)
#define V8(kvh, t, e) ROW8(v_blocks, kvh, t, e)
#else
layout(std430, binding = 1) readonly buffer K8 { uvec4 k_cache8[]; };  // [n_kv, cache_rows, HD / 8]
layout(std430, binding = 2) readonly buffer V8 { uvec4 v_cache8[]; };
#define K8(kvh, t, e) k_cache8[(KV_ROW(kvh, t)) * (HD / 8) + (e)]
#define V8(kvh, t, e) v_cache8[(KV_ROW(kvh, t)) * (HD / 8) + (e)]
#endif

shared uvec4 q_tile[BQ * PITCH8];  // 8 halves per uvec4
shared uvec4 k_tile[BK * PITCH8];
shared uvec4 v_tile[BK * PITCH8];
shared float s_tile[SG * 16 * SP];   // per subgroup: 16 rows of scores, then of output
shared uvec4 p_tile[SG * 16 * PP8];  // per subgroup: 16 rows of weights as halves

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
// Named fragments and accumulators, one per 16 dims (an array of them would live in local memory
// on this driver: gemm_cm.comp).
#if DB == 4
#define EACH_D(F) F(0) F(1) F(2) F(3)
#else
#define EACH_D(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)
#endif

// The first cache row a query at `pos` sees.
uint first_key(uint pos) { return p.a.window > 0 && pos + 1 > p.a.window ? pos + 1 - p.a.window : 0; }

// A tile of keys t0 .. t0 + BK - 1 of K (and V) moves in two steps: load_keys() issues the
// global loads into registers, store_keys() puts them into the shared tiles, zero at or past
// key_end (so that a zero weight never meets a NaN of an unwritten row in the V products). The
// loop issues the next tile's loads before the products of this one, so that they are in
// flight while the products run.
#define KEY_ITEMS (BK * (HD / 8) / (SG * 32))
uvec4 k_regs[KEY_ITEMS], v_regs[KEY_ITEMS];
void load_keys(uint t0, uint key_end, uint kvh, bool with_v) {
    [[unroll]] for (uint j = 0; j < KEY_ITEMS; ++j) {
        const uint i = gl_LocalInvocationID.x + j * SG * 32, r = i / (HD / 8), e = i % (HD / 8);
        const uint t = t0 + r < key_end ? t0 + r : t0;
        k_regs[j] = K8(kvh, t, e);
        if (with_v) v_regs[j] = V8(kvh, t, e);
    }
}
void store_keys(uint t0, uint key_end, bool with_v) {
    [[unroll]] for (uint j = 0; j < KEY_ITEMS; ++j) {
        const uint i = gl_LocalInvocationID.x + j * SG * 32, r = i / (HD / 8), e = i % (HD / 8);
        const bool inside = t0 + r < key_end;
        k_tile[r * PITCH8 + e] = inside ? k_regs[j] : uvec4(0);
        if (with_v) v_tile[r * PITCH8 + e] = inside ? v_regs[j] : uvec4(0);
    }
}

void main() {
    const QueryBlock qb = query_block(BQ);
    const uint h = gl_WorkGroupID.y;
    if (qb.rows == 0) return;  // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint kvh = h / (p.a.n_heads / p.a.n_kv_heads);

    // The block's Q rows, scaled, as halves.
    for (uint i = tid; i < BQ * (HD / 8); i += gl_WorkGroupSize.x) {
        const uint r = i / (HD / 8), e = i % (HD / 8);
        const uint at = (qb.first + min(r, qb.rows - 1)) * p.q_stride + h * HD + 8 * e;
        uvec4 hq;
        [[unroll]] for (uint c = 0; c < 4; ++c) hq[c] = packHalf2x16(vec2(q[at + 2 * c], q[at + 2 * c + 1]) * p.a.scale);
        q_tile[r * PITCH8 + e] = r < qb.rows ? hq : uvec4(0);
    }
    barrier();
#define LOAD_Q(d) FRAG qa##d; coopMatLoadNV(qa##d, q_tile, (sg * 16 * PITCH + 16 * d) / 8, PITCH8, false);
    EACH_D(LOAD_Q)

    // This lane's row of the subgroup's 16 and its half of each score tile's keys.
    const uint r = lane / 2, half_keys = (lane % 2) * (BK / 2);
    const uint local = sg * 16 + r, row = qb.first + local, pos = qb.pos + local;
    const bool live = local < qb.rows;
    const uint my_first = first_key(pos);
    const uint key_begin = block_keys_begin(first_key(qb.pos), BK), key_end = qb.pos + qb.rows;
    const uint s_row = (sg * 16 + r) * SP;

    // The scores of the staged keys for the subgroup's 16 rows, into its score tile.
#define SCORE(d) { FRAG kb; coopMatLoadNV(kb, k_tile, (16 * j * PITCH + 16 * d) / 8, PITCH8, true); sacc = coopMatMulAddNV(qa##d, kb, sacc); }
#define SCORES()                                                                     \
    [[unroll]] for (uint j = 0; j < BK / 16; ++j) {                                  \
        ACC sacc = ACC(0.0);                                                         \
        EACH_D(SCORE)                                                                \
        coopMatStoreNV(sacc, s_tile, sg * 16 * SP + 16 * j, SP, false);              \
    }                                                                                \
    subgroupMemoryBarrierShared();                                                   \
    subgroupBarrier();
    float m = -1.0 / 0.0;
    load_keys(key_begin, key_end, kvh, false);
    for (uint t0 = key_begin; t0 < key_end; t0 += BK) {
        store_keys(t0, key_end, false);
        barrier();
        if (t0 + BK < key_end) load_keys(t0 + BK, key_end, kvh, false);
        SCORES()
        [[unroll]] for (uint j = 0; j < BK / 2; ++j) {
            float s = s_tile[s_row + half_keys + j];
            if (p.a.softcap > 0.0) s = p.a.softcap * tanh(s / p.a.softcap);
            const uint t = t0 + half_keys + j;
            if (live && t >= my_first && t <= pos) m = max(m, s);
        }
        barrier();  // the tiles are read
    }
    m = max(m, subgroupShuffleXor(m, 1));
    const float m_ref = m > -1.0 / 0.0 ? m : 0.0;  // a row past n sees nothing: every weight 0

#define DECLARE_O(d) ACC o##d = ACC(0.0);
    EACH_D(DECLARE_O)
#define WEIGHTED_V(d) { FRAG vb; coopMatLoadNV(vb, v_tile, (16 * kb * PITCH + 16 * d) / 8, PITCH8, false); o##d = coopMatMulAddNV(pa, vb, o##d); }
    float l = 0.0;
    load_keys(key_begin, key_end, kvh, true);
    for (uint t0 = key_begin; t0 < key_end; t0 += BK) {
        store_keys(t0, key_end, true);
        barrier();
        if (t0 + BK < key_end) load_keys(t0 + BK, key_end, kvh, true);
        SCORES()
        // Weights as halves; l sums the rounded weights, which the products see.
        uint w2[BK / 4];
        [[unroll]] for (uint j = 0; j < BK / 2; j += 2) {
            vec2 w;
            [[unroll]] for (uint c = 0; c < 2; ++c) {
                float s = s_tile[s_row + half_keys + j + c];
                if (p.a.softcap > 0.0) s = p.a.softcap * tanh(s / p.a.softcap);
                const uint t = t0 + half_keys + j + c;
                w[c] = live && t >= my_first && t <= pos ? exp(s - m_ref) : 0.0;
            }
            w2[j / 2] = packHalf2x16(w);
            const vec2 rounded = unpackHalf2x16(w2[j / 2]);
            l += rounded.x + rounded.y;
        }
        const uint p_at = (sg * 16 + r) * PP8 + half_keys / 8;
        [[unroll]] for (uint v = 0; v < BK / 16; ++v) p_tile[p_at + v] = uvec4(w2[4 * v], w2[4 * v + 1], w2[4 * v + 2], w2[4 * v + 3]);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint kb = 0; kb < BK / 16; ++kb) {
            FRAG pa;
            coopMatLoadNV(pa, p_tile, (sg * 16 * PP + 16 * kb) / 8, PP8, false);
            EACH_D(WEIGHTED_V)
        }
        barrier();  // the tiles are read
    }
    l += subgroupShuffleXor(l, 1);

    // The output, 16 dims at a time through the score tile: lane 2r + c writes dims 8c .. 8c + 7.
    const uint out_at = row * p.out_stride + h * HD + (lane % 2) * 8;
#define PUT_O(d)                                                                            \
    coopMatStoreNV(o##d, s_tile, sg * 16 * SP, SP, false);                                  \
    subgroupMemoryBarrierShared();                                                          \
    subgroupBarrier();                                                                      \
    if (live)                                                                               \
        [[unroll]] for (uint c = 0; c < 8; ++c)                                             \
            out_data[out_at + 16 * d + c] = OTYPE(s_tile[s_row + (lane % 2) * 8 + c] / l);  \
    subgroupBarrier();
    EACH_D(PUT_O)
}
