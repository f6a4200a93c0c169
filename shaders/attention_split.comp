#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
// attention_split: decode attention, split over the cache. One workgroup per (query head,
// chunk of cache rows) scores the chunk's rows, forms their max and sum of exps and the
// exp-weighted V sum, and writes them as a partial [head_dim | max | sum]. The last workgroup
// of a head to finish merges the partials of the chunks in use into out (a counter per head
// after the partials says which is last), so attention costs one dependent dispatch, not two;
// a head whose rows fit one chunk writes out directly. With K_FORMAT/V_FORMAT it reads a
// quantized cache (kv_format.glsl), dequantizing in registers; with KV_RING or KV_BLOCKS a
// ring or a cache in blocks (kv_rows.glsl).
//
// With KV_BATCH (a batched step's rows, engine/batch.h, each in its own sequence's blocks of a
// pool), the workgroups along x are (row, query head), row-major, and each row attends its own
// sequence through its own position as the one sequence's query does: the row's q and out sit
// q_stride and out_stride floats apart, its partials and arrival counters have a slot per
// (row, head), the counters in a binding of their own (8, where the hand-off counters stand
// otherwise). Rows marked tiled are a query tile's (flash_attention, flash_cm).
#include "common.glsl"
#define KV_HEAD_DIM p.head_dim
#define KV_ROWS p.cache_rows
#define KV_HEADS p.n_kv_heads
#include "kv_cache_read.glsl"
#include "reduce.glsl"

layout(local_size_x = AKUNU_ATTENTION_CHUNK) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };              // [n_heads, head_dim]
// [n_heads, n_chunks, head_dim + 2], then a u32 arrival counter per head (zero between
// dispatches). Coherent: the merging workgroup reads what the others wrote.
layout(std430, binding = 3) coherent buffer P { float partial[]; };
layout(std430, binding = 4) readonly buffer Step { STEP_BLOCK };
layout(std430, binding = 7) writeonly buffer O { float out_data[]; };     // [n_heads, head_dim]
#ifdef KV_BATCH
// [rows, n_heads, n_chunks, head_dim + 2] partials; the counters [rows, n_heads] at binding 8.
layout(std430, binding = 8) coherent buffer PW { uint partial_words[]; };
#define COUNTER_AT(u) (u)
// FlashAttentionParams: the attention's, then the step's rows and the Q and out row strides.
layout(push_constant) uniform Push { AttentionParams p; uint table_rows; uint q_stride; uint out_stride; };
uint row_first_pos = 0u, row_first_row = 0u, row_seq = 0u;  // the current row's (kv_recent.glsl)
#define KV_STEP_POS row_first_pos
#define KV_STEP_ROW0 row_first_row
#define KV_RING_SEQ row_seq
#else
layout(std430, binding = 3) coherent buffer PW { uint partial_words[]; };
#define COUNTER_AT(u) (p.n_heads * p.n_chunks * (p.head_dim + 2) + (u))
#define HANDOFF_BINDING 8  // p.handoff_signal's counters
#include "handoff.glsl"
layout(push_constant) uniform Push { AttentionParams p; };
#define KV_STEP_POS step.pos
#endif
#define KV_PARAMS p
#include "kv_recent.glsl"

// The query's head: the first floats of its q and out rows, and its partials' and counter's
// index (a head of the one sequence, or a (row, head) of a batched step).
uint q_at = 0u, out_at = 0u, unit = 0u;

shared float weight[AKUNU_ATTENTION_CHUNK];
shared bool merging;

// With UNROTATE (a rotated cache's Hadamard block, kv_format.h; 0: none) the head's output is
// gathered here and rotated back before it is written (write_unrotated, in
// attention_split_merge.glsl), in place of a hadamard_rows dispatch after attention.
layout(constant_id = 2) const uint UNROTATE = 0;
shared float head_out[AKUNU_ATTENTION_CHUNK];

// Dim d of the head's output: into out, or into head_out to be rotated back first.
void write_out(uint d, float x) {
    if (UNROTATE > 0)
        head_out[d] = x;
    else
        out_data[out_at + d] = x;
}

// A chunk's weighted V sum for dim d: into its partial, or, for the only chunk in use, divided
// by its sum of exps straight into the output.
void write_dim(uint slot, uint d, float total, float l, bool alone) {
    if (alone)
        write_out(d, total / l);
    else
        partial[slot + d] = total;
}

// How a team covers a cache row (kernels::launch::attention_split_shape): TEAM neighbouring
// invocations, each loading LANE_VECS vectors of the row (16 bytes of an f16 row, 8 bytes of a
// quantized one's codes). A quantized row with LANE_VECS = 0 is read one value at a time
// (attend_rows).
layout(constant_id = 0) const uint TEAM = 8;       // lanes per row: a power of two inside a subgroup
layout(constant_id = 1) const uint LANE_VECS = 1;  // vectors of a row per lane
// Rows per team and round: K and V of 4 rows are 32 registers of loads in flight per lane. 2
// rows ran as fast, 8 slower for the registers they hold (bench/NOTES.md).
#define BATCH 4
// Quantized rows per team and round: 2. Four held 80 registers an invocation for int4, and fewer
// workgroups fitted a compute unit (bench/NOTES.md, "Two coded rows a round").
#define CODE_BATCH 2
const uint TEAMS = AKUNU_ATTENTION_CHUNK / TEAM;
shared float sums[AKUNU_ATTENTION_CHUNK * 8];  // the teams' V sums, one slice of 8 values at a time
// Each subgroup's maximum and its sum of exps relative to it: where the teams meet.
shared float meet_m[AKUNU_MAX_SUBGROUPS], meet_l[AKUNU_MAX_SUBGROUPS];
// q of the head, read by each lane straight from the buffer (through L1) as it scores: staging
// it in shared memory put a round trip and a barrier before the first K and V loads, which
// measured slower behind long caches (bench/NOTES.md).
layout(std430, binding = 0) readonly buffer Q4 { vec4 q4[]; };

// A row's score from its team's partial dot products, or -inf where it is not attended.
float team_score(float d, bool attended) {
    for (uint w = TEAM / 2; w > 0; w /= 2) d += subgroupShuffleXor(d, w);
    d *= p.scale;
    if (p.softcap > 0.0) d = p.softcap * tanh(d / p.softcap);
    return attended ? d : -1.0 / 0.0;
}

// A chunk's maximum score and sum of exps after its V sums, for the merge (a head's only chunk
// writes out directly and needs neither).
void write_stats(uint slot, float m, float l, bool alone) {
    if (gl_LocalInvocationID.x == 0 && !alone) {
        partial[slot + p.head_dim] = m;
        partial[slot + p.head_dim + 1] = l;
    }
}

// The teams meet, for the online-softmax paths: the chunk's max M (every chunk in use holds an
// attended row), each team's sums rescaled by exp(m - M) (0 for a team that attended nothing),
// and the sum of exps L, from one exchange of each subgroup's maximum and its sum relative to it
// (one barrier, not a maximum and then a sum). Returns exp(m - M) and sets M and L.
float meet_factor(float m, float l, uint lane, out float M, out float L) {
    const float ms = subgroupMax(m);
    const float ls = subgroupAdd(lane == 0 && m > -1.0 / 0.0 ? l * exp(m - ms) : 0.0);
    if (subgroupElect()) meet_m[gl_SubgroupID] = ms, meet_l[gl_SubgroupID] = ls;
    barrier();
    M = -1.0 / 0.0, L = 0.0;
    for (uint g = 0; g < gl_NumSubgroups; ++g) M = max(M, meet_m[g]);
    for (uint g = 0; g < gl_NumSubgroups; ++g)
        if (meet_m[g] > -1.0 / 0.0) L += meet_l[g] * exp(meet_m[g] - M);
    return exp(m - M);
}

// One slice of the teams' V sums added through shared memory: each lane's 8 values lo, hi (already
// rescaled) are dims lane * lane_dims + offset + c, c < 8. `parts` neighbouring invocations share
// a dim, each summing every parts-th team, and meet through shuffles: fewer dependent
// shared-memory loads than one invocation per dim.
void meet_slice(vec4 lo, vec4 hi, uint lane_dims, uint offset, uint slot, float L, bool alone) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint c = 0; c < 4; ++c) {
        sums[tid * 8 + c] = lo[c];
        sums[tid * 8 + 4 + c] = hi[c];
    }
    barrier();
    const uint width = TEAM * 8, parts = min(AKUNU_ATTENTION_CHUNK / width, gl_SubgroupSize);
    const uint dim_in = tid / parts, part = tid % parts;
    float total = 0.0;
    if (dim_in < width)
        for (uint g = part; g < TEAMS; g += parts) total += sums[g * width + dim_in];
    for (uint w = parts / 2; w > 0; w /= 2) total += subgroupShuffleXor(total, w);
    const uint dim = (dim_in / 8) * lane_dims + offset + dim_in % 8;
    if (part == 0 && dim_in < width && dim < p.head_dim) write_dim(slot, dim, total, L, alone);
    barrier();
}

#ifdef KV_QUANTIZED
// Quantized rows that are not whole 8-byte vectors for a team (LANE_VECS = 0): K and V read one
// value at a time through K_AT / V_AT.
void attend_rows(uint kvh, uint chunk, uint begin, uint first, uint pos, bool alone) {
    const uint tid = gl_LocalInvocationID.x;
    // Scores: teams of 8 neighbouring invocations share a cache row, lane l reading dims
    // l, l + 8, ... so that a team's loads of the row are contiguous; 32 teams cover 32 rows
    // per pass, and three shuffles sum a team's products.
    const uint lane = tid % 8, team = tid / 8;
    const uint qb = q_at;
    for (uint r = team; r < AKUNU_ATTENTION_CHUNK; r += gl_WorkGroupSize.x / 8) {
        const uint t = begin + r;
        float d = 0.0;
        if (t <= pos && t < p.max_len && KV_IS_RECENT(t, pos)) {
            for (uint i = lane; i < p.head_dim; i += 8) d += q[qb + i] * K_RECENT(kvh, t, i);
        } else if (t <= pos && t < p.max_len) {
            const kv_row_t kr = KV_ROW(kvh, t);
            for (uint i = lane; i < p.head_dim; i += 8) d += q[qb + i] * K_AT(kr, i);
            d *= K_SCALE(kr);
        }
        d += subgroupShuffleXor(d, 4);
        d += subgroupShuffleXor(d, 2);
        d += subgroupShuffleXor(d, 1);
        if (lane == 0) {
            d *= p.scale;
            if (p.softcap > 0.0) d = p.softcap * tanh(d / p.softcap);
            weight[r] = t >= first && t <= pos ? d : -1.0 / 0.0;
        }
    }
    barrier();
    const float s = weight[tid];
    const bool valid = s > -1.0 / 0.0;
    const float m = workgroup_max(s);
    const float e = valid ? exp(s - m) : 0.0;
    const float l = workgroup_sum(e);
    // The V rows' scales ride on the weights (1 for an f16 cache). Rows past pos are read but
    // masked: in a cache of blocks they lie in the block of an attended row (chunk = block).
    // A recent row's f16 copy has no scale.
    const bool recent = KV_IS_RECENT(begin + tid, pos);
    weight[tid] = valid ? e * (recent ? 1.0 : V_SCALE(KV_ROW(kvh, begin + tid))) : 0.0;
    barrier();

    // Weighted V: invocation tid takes dim tid % head_dim of every (256 / head_dim)-th row,
    // so all 256 invocations work; the row groups are summed through shared memory.
    const uint slot = (unit * p.n_chunks + chunk) * (p.head_dim + 2);
    const uint rows = min(AKUNU_ATTENTION_CHUNK, pos + 1 - begin);
    const uint groups = gl_WorkGroupSize.x / p.head_dim, dim = tid % p.head_dim, group = tid / p.head_dim;
    float acc = 0.0;
    if (group < groups)
        for (uint j = group; j < rows; j += groups)
            acc += weight[j] * (KV_IS_RECENT(begin + j, pos) ? V_RECENT(kvh, begin + j, dim)
                                                              : V_AT(KV_ROW(kvh, begin + j), dim));
    barrier();  // every weight has been read
    weight[tid] = acc;
    barrier();
    if (tid < p.head_dim) {
        float total = 0.0;
        for (uint g = 0; g < groups; ++g) total += weight[g * p.head_dim + tid];
        write_dim(slot, tid, total, l, alone);
    }
    write_stats(slot, m, l, alone);
}

// Quantized rows 8 bytes a lane (LANE_VECS = 1), the f16 path's online softmax per team: lane l
// of a row's team holds K's codes of dims [l CK, (l + 1) CK) and V's of [l CV, (l + 1) CV)
// (lanes past a side's vectors hold none), q's values under its K codes in registers, and its
// dims' weighted V sums. A row's scale multiplies its dot product (K) or its weight (V) once.
// (16 bytes a lane held more registers and ran slower: bench/NOTES.md, "Quantized decode
// attention 8 bytes a lane".) The recent window's rows (kv_recent.glsl) are left out of the
// coded rows' loop and taken one per team after it, from their f16 copies, so that the loop is
// the same code with or without a window.
const uint CK = 2u * KV_PER_WORD(K_FORMAT), CV = 2u * KV_PER_WORD(V_FORMAT);  // codes a vector
#ifdef KV_BLOCKS
layout(buffer_reference, std430, buffer_reference_align = 8) buffer KvCodeVecs { uvec2 v[]; };
#define K_CODES(r, i) KvCodeVecs(k_blocks[(r).x]).v[(r).y * (p.head_dim / CK) + (i)]
#define V_CODES(r, i) KvCodeVecs(v_blocks[(r).x]).v[(r).y * (p.head_dim / CV) + (i)]
#else
layout(std430, binding = 1) readonly buffer KC { uvec2 k_codes[]; };  // [n_kv, rows, head_dim / CK]
layout(std430, binding = 2) readonly buffer VC { uvec2 v_codes[]; };
#define K_CODES(r, i) k_codes[(r) * (p.head_dim / CK) + (i)]
#define V_CODES(r, i) v_codes[(r) * (p.head_dim / CV) + (i)]
#endif
// Code j of a vector of format f.
#define VEC_CODE(u, j, f) kv_code((u)[(j) / KV_PER_WORD(f)], (j) % KV_PER_WORD(f), f)

#ifdef KV_PACK
// The step's own row, packed here rather than by a kv_store dispatch before (kernels::attention,
// AttentionNewest::kPacked): binding 0 holds the step's [q | k | v] row, and in the chunk
// holding pos one team forms the row's codes of its KV head as kv_store does (the same scale,
// rounding and codes) and scores it before its loop over the coded rows, which leaves pos out
// (other query heads of the group may not have it yet); the group's first query head writes the
// codes to the cache. Lane l takes K's dims [l CK, (l + 1) CK) and V's [l CV, (l + 1) CV), as it
// reads a cached row; a side's max |x| meets through the team's shuffles, with no barrier.
#define KV_K_SCALES_BINDING 5
#define KV_V_SCALES_BINDING 6
#include "kv_cache_write.glsl"
#define CODED_END(pos) (pos)

// One side's values of the lane (n of them, from float `at` of binding 0) into codes, the
// lane's two words of them, and the side's rounded scale: the team's max |x| first.
#define PACK_SIDE(vals, n, at, own, f, words, scale)                                       \
    {                                                                                      \
        float amax = 0.0;                                                                  \
        [[unroll]] for (uint j = 0; j < n; j += 4) {                                       \
            const vec4 x = own ? q4[(at) / 4 + j / 4] : vec4(0.0);                         \
            vals[j] = x.x, vals[j + 1] = x.y, vals[j + 2] = x.z, vals[j + 3] = x.w;        \
            amax = max(amax, max(max(abs(x.x), abs(x.y)), max(abs(x.z), abs(x.w))));      \
        }                                                                                  \
        for (uint w = TEAM / 2; w > 0; w /= 2) amax = max(amax, subgroupShuffleXor(amax, w)); \
        scale = kv_row_scale(amax, f);                                                     \
        const float inv = kv_inverse(scale);                                               \
        words = uvec2(0);                                                                  \
        [[unroll]] for (uint j = 0; j < n; ++j) {                                          \
            const uint c = kv_encode(vals[j] * inv, f);                                    \
            words[j / KV_PER_WORD(f)] |= c << ((j % KV_PER_WORD(f)) * KV_BITS(f));         \
            vals[j] = kv_code(c, 0, f);                                                    \
        }                                                                                  \
    }

// The team's share of row pos: the lane's K and V code values and the row's two scales.
void pack_newest(uint kvh, uint pos, uint lane, out float kn[CK], out float vn[CV], out float ks, out float vs) {
    const bool k_lane = lane < p.head_dim / CK, v_lane = lane < p.head_dim / CV;
    const uint k_at = p.n_heads * p.head_dim + kvh * p.head_dim, v_at = k_at + p.n_kv_heads * p.head_dim;
    float k_scale, v_scale;
    uvec2 kw, vw;
    PACK_SIDE(kn, CK, k_at + lane * CK, k_lane, K_FORMAT, kw, k_scale)
    PACK_SIDE(vn, CV, v_at + lane * CV, v_lane, V_FORMAT, vw, v_scale)
    if (unit % (p.n_heads / p.n_kv_heads) == 0) {  // the group's first query head writes
        const kv_row_t row = KV_ROW(kvh, pos);
        const uint k_words = p.head_dim / KV_PER_WORD(K_FORMAT), v_words = p.head_dim / KV_PER_WORD(V_FORMAT);
        if (k_lane) K_WORD_STORE(row, k_words, 2 * lane, kw.x), K_WORD_STORE(row, k_words, 2 * lane + 1, kw.y);
        if (v_lane) V_WORD_STORE(row, v_words, 2 * lane, vw.x), V_WORD_STORE(row, v_words, 2 * lane + 1, vw.y);
        if (lane == 0) K_SCALE_STORE(row, float16_t(k_scale)), V_SCALE_STORE(row, float16_t(v_scale));
    }
    ks = k_scale, vs = v_scale;
}
#else
#define CODED_END(pos) ((pos) + 1u)
#endif

void attend_rows_codes(uint kvh, uint chunk, uint begin, uint first, uint pos, bool alone) {
    const uint tid = gl_LocalInvocationID.x, lane = tid % TEAM, team = tid / TEAM;
    const bool k_lane = lane < p.head_dim / CK, v_lane = lane < p.head_dim / CV;
    float qv[CK];
    [[unroll]] for (uint j = 0; j < CK; j += 4) {
        const vec4 x = k_lane ? q4[q_at / 4 + lane * (CK / 4) + j / 4] : vec4(0.0);
        qv[j] = x.x, qv[j + 1] = x.y, qv[j + 2] = x.z, qv[j + 3] = x.w;
    }
    float m = -1.0 / 0.0, l = 0.0, acc[CV];
    [[unroll]] for (uint j = 0; j < CV; ++j) acc[j] = 0.0;
#ifdef KV_PACK
    if (pos >= begin && pos < begin + AKUNU_ATTENTION_CHUNK && team == TEAMS - 1) {  // the step's row, first
        float kn[CK], vn[CV], ks, vs;
        pack_newest(kvh, pos, lane, kn, vn, ks, vs);
#ifndef KV_RECENT  // a window's newest row is scored from its f16 copy, with the window's rows
        float d = 0.0;
        [[unroll]] for (uint j = 0; j < CK; ++j) d += qv[j] * kn[j];
        const float sr = team_score(d * ks, pos >= first && pos < p.max_len);
        if (sr > -1.0 / 0.0) {  // uniform in the team; exp(sr - sr) = 1 weights the row
            m = sr, l = 1.0;
            [[unroll]] for (uint j = 0; j < CV; ++j) acc[j] = vs * vn[j];
        }
#endif
    }
#endif
    // Every loop over qv and acc is unrolled: indexed at run time, they would leave registers.
    for (uint r0 = team; r0 < AKUNU_ATTENTION_CHUNK && begin + r0 <= pos; r0 += CODE_BATCH * TEAMS) {
        uvec2 kx[CODE_BATCH], vx[CODE_BATCH];
        float ks[CODE_BATCH], vs[CODE_BATCH];
        bool live[CODE_BATCH];
        [[unroll]] for (uint b = 0; b < CODE_BATCH; ++b) {
            const uint t = begin + r0 + b * TEAMS;
            live[b] = r0 + b * TEAMS < AKUNU_ATTENTION_CHUNK && t < CODED_END(pos) && t < p.max_len && !KV_IS_RECENT(t, pos);
            const kv_row_t row = KV_ROW(kvh, live[b] ? t : begin);
            kx[b] = live[b] && k_lane ? K_CODES(row, lane) : uvec2(0);
            vx[b] = live[b] && v_lane ? V_CODES(row, lane) : uvec2(0);
            ks[b] = live[b] ? K_SCALE(row) : 0.0;
            vs[b] = live[b] ? V_SCALE(row) : 0.0;
        }
        float s[CODE_BATCH];
        float mb = m;
        [[unroll]] for (uint b = 0; b < CODE_BATCH; ++b) {
            float d = 0.0;
            [[unroll]] for (uint j = 0; j < CK; ++j) d += qv[j] * VEC_CODE(kx[b], j, K_FORMAT);
            s[b] = team_score(d * ks[b], live[b] && begin + r0 + b * TEAMS >= first);
            mb = max(mb, s[b]);
        }
        if (mb == -1.0 / 0.0) continue;  // no attended row yet (uniform in the team)
        const float c = exp(m - mb);      // 0 while m is -inf
        l *= c;
        [[unroll]] for (uint j = 0; j < CV; ++j) acc[j] *= c;
        [[unroll]] for (uint b = 0; b < CODE_BATCH; ++b) {
            const float e = exp(s[b] - mb), w = e * vs[b];
            l += e;
            [[unroll]] for (uint j = 0; j < CV; ++j) acc[j] += w * VEC_CODE(vx[b], j, V_FORMAT);
        }
        m = mb;
    }
#ifdef KV_RECENT
    // The window's rows in this chunk, one per team.
    const uint recent_from = max(begin, pos + 1 > p.recent ? pos + 1 - p.recent : 0u);
    for (uint t = recent_from + team; t <= min(pos, begin + AKUNU_ATTENTION_CHUNK - 1); t += TEAMS) {
        float d = 0.0;
        if (k_lane)
            [[unroll]] for (uint j = 0; j < CK; ++j) d += qv[j] * K_RECENT(kvh, t, lane * CK + j);
        const float sr = team_score(d, t >= first && t < p.max_len);
        if (sr == -1.0 / 0.0) continue;  // uniform in the team
        const float mb = max(m, sr), c = exp(m - mb), e = exp(sr - mb);
        l = l * c + e;
        [[unroll]] for (uint j = 0; j < CV; ++j) acc[j] = acc[j] * c + (v_lane ? e * V_RECENT(kvh, t, lane * CV + j) : 0.0);
        m = mb;
    }
#endif
    const uint slot = (unit * p.n_chunks + chunk) * (p.head_dim + 2);
    float M, L;
    const float f = meet_factor(m, l, lane, M, L);
    [[unroll]] for (uint i = 0; i < CV / 8; ++i)
        meet_slice(vec4(acc[8 * i], acc[8 * i + 1], acc[8 * i + 2], acc[8 * i + 3]) * f,
                   vec4(acc[8 * i + 4], acc[8 * i + 5], acc[8 * i + 6], acc[8 * i + 7]) * f, CV, 8 * i, slot, L, alone);
    write_stats(slot, M, L, alone);
}
#endif

#ifndef KV_QUANTIZED
// An f16 cache (one buffer, a ring or blocks), read as 16-byte vectors of 8 halves, the way
// flash decoding reads it. A team of TEAM neighbouring invocations covers a row, lane l loading
// vectors l, l + TEAM, ...; the 256 / TEAM teams take every (256 / TEAM)-th row of the chunk,
// BATCH rows per round, each row's K and V loaded together before any product, and every team
// keeps its own running max, sum of exps and weighted V sum (online softmax). So a chunk's
// loads are in flight together and no barrier separates the scores from the V sum; the teams
// meet once, at the end. (Scoring the chunk first and summing V after a workgroup softmax left
// the V loads waiting behind the scores, which was slower behind long caches: bench/NOTES.md,
// decode attention as online softmax per team.)
#ifdef KV_BLOCKS
layout(buffer_reference, std430, buffer_reference_align = 16) buffer KvVecs { uvec4 v[]; };
#define K_VEC(r, i) KvVecs(k_blocks[(r).x]).v[(r).y * vecs + (i)]
#define V_VEC(r, i) KvVecs(v_blocks[(r).x]).v[(r).y * vecs + (i)]
#else
layout(std430, binding = 1) readonly buffer K8 { uvec4 k_vec[]; };  // [n_kv, rows, head_dim / 8]
layout(std430, binding = 2) readonly buffer V8 { uvec4 v_vec[]; };
#define K_VEC(r, i) k_vec[(r) * vecs + (i)]
#define V_VEC(r, i) v_vec[(r) * vecs + (i)]
#endif
// A cache row's vector v (8 halves) dotted with q's, q starting at vec4 q0 of the buffer.
float dot8(uvec4 k, uint q0, uint v) {
    return dot(vec4(unpackHalf2x16(k.x), unpackHalf2x16(k.y)), q4[q0 + 2 * v]) +
           dot(vec4(unpackHalf2x16(k.z), unpackHalf2x16(k.w)), q4[q0 + 2 * v + 1]);
}

void attend_rows_vec4(uint kvh, uint chunk, uint begin, uint first, uint pos, bool alone) {
    const uint tid = gl_LocalInvocationID.x, vecs = p.head_dim / 8;
    const uint lane = tid % TEAM, team = tid / TEAM;
    const uint q0 = q_at / 4;  // q_at is a multiple of 4 (kernels::attention_rows)

    float m = -1.0 / 0.0, l = 0.0;
    vec4 acc[LANE_VECS][2];
    [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) acc[i][0] = acc[i][1] = vec4(0.0);
    // A team stops at the first round past pos (early in a sequence most of the chunk lies there).
    for (uint r0 = team; r0 < AKUNU_ATTENTION_CHUNK && begin + r0 <= pos; r0 += BATCH * TEAMS) {
        uvec4 kx[BATCH][LANE_VECS], vx[BATCH][LANE_VECS];
        bool live[BATCH];  // the row is in the chunk and cached (rows before `first` load but score -inf)
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            const uint t = begin + r0 + b * TEAMS;
            live[b] = r0 + b * TEAMS < AKUNU_ATTENTION_CHUNK && t <= pos && t < p.max_len;
            const kv_row_t row = KV_ROW(kvh, live[b] ? t : begin);
            [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
                const uint v = lane + i * TEAM;
                kx[b][i] = live[b] && v < vecs ? K_VEC(row, v) : uvec4(0);
                vx[b][i] = live[b] && v < vecs ? V_VEC(row, v) : uvec4(0);
            }
        }
        float s[BATCH];
        float mb = m;
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            float d = 0.0;
            [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) d += dot8(kx[b][i], q0, min(lane + i * TEAM, vecs - 1));  // past vecs: zero K
            s[b] = team_score(d, live[b] && begin + r0 + b * TEAMS >= first);
            mb = max(mb, s[b]);
        }
        if (mb == -1.0 / 0.0) continue;  // no attended row yet (uniform in the team)
        const float c = exp(m - mb);      // 0 while m is -inf
        l *= c;
        [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
            acc[i][0] *= c;
            acc[i][1] *= c;
        }
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            const float e = exp(s[b] - mb);
            l += e;
            [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) {
                acc[i][0] += e * vec4(unpackHalf2x16(vx[b][i].x), unpackHalf2x16(vx[b][i].y));
                acc[i][1] += e * vec4(unpackHalf2x16(vx[b][i].z), unpackHalf2x16(vx[b][i].w));
            }
        }
        m = mb;
    }

    // The teams meet (meet_factor), then their V sums, one vector slot of every lane at a time:
    // lane l's slot i holds dims (l + i TEAM) 8 + c.
    const uint slot = (unit * p.n_chunks + chunk) * (p.head_dim + 2);
    float M, L;
    const float f = meet_factor(m, l, lane, M, L);
    [[unroll]] for (uint i = 0; i < LANE_VECS; ++i) meet_slice(acc[i][0] * f, acc[i][1] * f, 8, i * TEAM * 8, slot, L, alone);
    write_stats(slot, M, L, alone);
}
#endif

#include "attention_split_merge.glsl"

// With p.handoff_signal, once a head's output is written, for the O GEMV that waits on it
// (gemv_tiles.comp's HANDOFF_WAIT). `p` is uniform.
void signal_head_written() {
#ifndef KV_BATCH
    if (p.handoff_signal != 0) handoff_count_in(p.handoff_signal);
#endif
}

void main() {
    const uint chunk = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
#ifdef KV_BATCH
    unit = gl_WorkGroupID.x;
    const uint k = unit / p.n_heads, h = unit % p.n_heads;
    if (k >= min(table_rows, step.n_tokens)) return;  // uniform across the workgroup
    const uint row = batch_rows[k].untiled_row;  // the step's k-th row that no query tile takes
    const uint pos = ROW_POS(row);
    ROW_ENTER(row);
    row_seq = batch_rows[row].seq;
    row_first_pos = batch_rows[row].first;
    row_first_row = row - (pos - row_first_pos);
    q_at = row * q_stride + h * p.head_dim;
    out_at = row * out_stride + h * p.head_dim;
#else
    const uint h = gl_WorkGroupID.x, pos = step.pos;
    unit = h;
    q_at = out_at = h * p.head_dim;
#endif
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const uint begin = chunk * AKUNU_ATTENTION_CHUNK;
    // The chunks holding attended rows; the others write nothing.
    const uint c_begin = first / AKUNU_ATTENTION_CHUNK, c_end = pos / AKUNU_ATTENTION_CHUNK + 1;
    if (chunk < c_begin || chunk >= c_end) return;  // uniform
    const bool alone = c_end - c_begin == 1;
#ifndef KV_QUANTIZED
    attend_rows_vec4(kvh, chunk, begin, first, pos, alone);
#else
    if (LANE_VECS == 0)
        attend_rows(kvh, chunk, begin, first, pos, alone);
    else
        attend_rows_codes(kvh, chunk, begin, first, pos, alone);
#endif
    if (alone) {
        if (UNROTATE > 0) write_unrotated();
        signal_head_written();
        return;
    }
    // The last of the head's chunks to arrive merges them: its partial writes and everyone
    // else's are made visible before the counter moves (the fence, then the workgroup barrier),
    // and it resets the counter for the next dispatch, which no other workgroup touches again.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0) {
        const uint at = COUNTER_AT(unit);
        merging = atomicAdd(partial_words[at], 1u) == c_end - c_begin - 1;
        if (merging) partial_words[at] = 0u;
    }
    barrier();
    if (!merging) return;  // uniform
    memoryBarrierBuffer();
    merge(c_begin, c_end);
    if (UNROTATE > 0) write_unrotated();
    signal_head_written();
}
