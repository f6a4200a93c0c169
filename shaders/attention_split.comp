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
// quantized cache (kv_format.glsl), decoding in registers; with KV_RING or KV_BLOCKS a ring or a
// cache in blocks (kv_rows.glsl); with KV_RECENT a quantized cache's recent window in f16.
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

// A chunk's weighted V sum for dim d: into its partial, or, for the only chunk in use, divided
// by its sum of exps straight into out.
void write_dim(uint slot, uint d, float total, float l, bool alone) {
    if (alone)
        out_data[out_at + d] = total / l;
    else
        partial[slot + d] = total;
}

// The cache, any format, read as 16-byte vectors the way flash decoding reads it: an f16 row of
// head_dim 128 is 16 vectors of 8 halves, a q8 one 8 vectors of 16 codes, an int4 or fp4 one 4
// vectors of 32 codes (kv_format.glsl KV_VEC_DIMS). A team of TEAM neighbouring invocations
// covers a row, lane l loading vectors l, l + TEAM, ...; the 256 / TEAM teams take every
// (256 / TEAM)-th row of the chunk, BATCH rows per round, each row's K and V (and a quantized
// row's two scales) loaded together before any product, and every team keeps its own running
// max, sum of exps and weighted V sum (online softmax). So a chunk's loads are in flight
// together and no barrier separates the scores from the V sum; the teams meet once, at the end.
// Codes are decoded in registers, four at a time; a row's K scale multiplies its score and its
// V scale its weight, not every value. (Scoring the chunk first and summing V after a workgroup
// softmax left the V loads waiting behind the scores, which was slower behind long caches:
// bench/NOTES.md, decode attention as online softmax per team.)
#ifdef KV_QUANTIZED
#define K_FMT K_FORMAT
#define V_FMT V_FORMAT
#else
#define K_FMT KV_F16
#define V_FMT KV_F16
#endif
const uint K_QUADS = KV_VEC_QUADS(K_FMT), V_QUADS = KV_VEC_QUADS(V_FMT);
// A row's 32-bit words of a side, and the vectors covering them (the last one partly, where a
// 4-bit row of head_dim 40 is 5 words).
uint row_words(uint f) { return p.head_dim * KV_BITS(f) / 32u; }
uint row_vecs(uint f) { return (row_words(f) + 3u) / 4u; }

// Vector v of row r of the keys (values = false) or the values, `words` words a row. Rows of
// whole vectors (every f16 row; q8 and 4-bit rows of head_dim a multiple of 16 and 32) are one
// 16-byte load; others gather the vector's words, the words past the row read as zero codes.
#ifdef KV_BLOCKS
layout(buffer_reference, std430, buffer_reference_align = 16) buffer KvVecs { uvec4 v[]; };
uvec4 load_vec(bool values, kv_row_t r, uint words, uint v) {
    const uvec2 block = values ? v_blocks[r.x] : k_blocks[r.x];
    if (words % 4u == 0u) return KvVecs(block).v[r.y * (words / 4u) + v];
    uvec4 x = uvec4(0);
    [[unroll]] for (uint c = 0; c < 4; ++c)
        if (4u * v + c < words) x[c] = KvWords(block).w[r.y * words + 4u * v + c];
    return x;
}
#else
layout(std430, binding = 1) readonly buffer K4 { uvec4 k_vec[]; };  // the rows as vectors
layout(std430, binding = 2) readonly buffer V4 { uvec4 v_vec[]; };
layout(std430, binding = 1) readonly buffer K1 { uint k_word[]; };   // and as words
layout(std430, binding = 2) readonly buffer V1 { uint v_word[]; };
uvec4 load_vec(bool values, kv_row_t r, uint words, uint v) {
    if (words % 4u == 0u) return values ? v_vec[r * (words / 4u) + v] : k_vec[r * (words / 4u) + v];
    uvec4 x = uvec4(0);
    [[unroll]] for (uint c = 0; c < 4; ++c)
        if (4u * v + c < words) x[c] = values ? v_word[r * words + 4u * v + c] : k_word[r * words + 4u * v + c];
    return x;
}
#endif
// A row's scale (1 for f16).
float row_scale(bool values, kv_row_t r) {
#ifdef KV_QUANTIZED
    return values ? V_SCALE(r) : K_SCALE(r);
#else
    return 1.0;
#endif
}
// Dims d .. d + 3 of a recent row's f16 copy (kv_recent.glsl), zero past the head.
vec4 recent_quad(bool values, uint kvh, uint t, uint d) {
    vec4 x = vec4(0.0);
    if (d < p.head_dim)
        [[unroll]] for (uint c = 0; c < 4; ++c) x[c] = values ? V_RECENT(kvh, t, d + c) : K_RECENT(kvh, t, d + c);
    return x;
}

layout(constant_id = 0) const uint TEAM = 8;  // lanes per row: a power of two inside a subgroup
// Vectors of a K row and of a V row per lane: ceil(row vectors / TEAM) (attention_split_shape).
layout(constant_id = 1) const uint K_LANE_VECS = 1;
layout(constant_id = 2) const uint V_LANE_VECS = 1;
// Rows per team and round: K and V of 4 rows are 32 registers of loads in flight per lane. 2
// rows ran as fast, 8 slower for the registers they hold (bench/NOTES.md).
#define BATCH 4
const uint TEAMS = AKUNU_ATTENTION_CHUNK / TEAM;
shared float sums[AKUNU_ATTENTION_CHUNK * 8];  // the teams' V sums, 8 dims of every lane at a time
// Each subgroup's maximum and its sum of exps relative to it: where the teams meet.
shared float meet_m[AKUNU_MAX_SUBGROUPS], meet_l[AKUNU_MAX_SUBGROUPS];
// q of the head, read by each lane straight from the buffer (through L1) as it scores: staging
// it in shared memory put a round trip and a barrier before the first K and V loads, which
// measured slower behind long caches (bench/NOTES.md).
layout(std430, binding = 0) readonly buffer Q4 { vec4 q4[]; };

void attend_rows_vec4(uint kvh, uint chunk, uint begin, uint first, uint pos, bool alone) {
    const uint tid = gl_LocalInvocationID.x, lane = tid % TEAM, team = tid / TEAM;
    const uint q0 = q_at / 4, q_last = q0 + p.head_dim / 4 - 1;  // q_at is a multiple of 4 (kernels::attention_rows)
    const uint k_row_words = row_words(K_FMT), v_row_words = row_words(V_FMT);
    const uint k_vecs = row_vecs(K_FMT), v_vecs = row_vecs(V_FMT);

    float m = -1.0 / 0.0, l = 0.0;
    vec4 acc[V_LANE_VECS * V_QUADS];  // quad j of the lane's i-th V vector at i * V_QUADS + j
    [[unroll]] for (uint i = 0; i < V_LANE_VECS * V_QUADS; ++i) acc[i] = vec4(0.0);
    // A team stops at the first round past pos (early in a sequence most of the chunk lies there).
    for (uint r0 = team; r0 < AKUNU_ATTENTION_CHUNK && begin + r0 <= pos; r0 += BATCH * TEAMS) {
        uvec4 kx[BATCH][K_LANE_VECS], vx[BATCH][V_LANE_VECS];
        float ks[BATCH], vs[BATCH];
        bool live[BATCH];    // the row is in the chunk and cached (rows before `first` load but score -inf)
        bool recent[BATCH];  // ... and read from its f16 copy instead (no loads here, scale 1)
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            const uint t = begin + r0 + b * TEAMS;
            live[b] = r0 + b * TEAMS < AKUNU_ATTENTION_CHUNK && t <= pos && t < p.max_len;
            recent[b] = live[b] && KV_IS_RECENT(t, pos);
            const bool stored = live[b] && !recent[b];
            const kv_row_t row = KV_ROW(kvh, stored ? t : begin);
            [[unroll]] for (uint i = 0; i < K_LANE_VECS; ++i) {
                const uint v = lane + i * TEAM;
                kx[b][i] = stored && v < k_vecs ? load_vec(false, row, k_row_words, v) : uvec4(0);
            }
            [[unroll]] for (uint i = 0; i < V_LANE_VECS; ++i) {
                const uint v = lane + i * TEAM;
                vx[b][i] = stored && v < v_vecs ? load_vec(true, row, v_row_words, v) : uvec4(0);
            }
            ks[b] = stored ? row_scale(false, row) : 1.0;
            vs[b] = stored ? row_scale(true, row) : 1.0;
        }
        float s[BATCH];
        float mb = m;
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            const uint t = begin + r0 + b * TEAMS;
            // Quad `quad` of the row pairs with q's; past the row K is zero and q's last stands in.
            float d = 0.0;
            if (recent[b]) {  // one branch a row (false where there is no recent window)
                [[unroll]] for (uint i = 0; i < K_LANE_VECS; ++i)
                    [[unroll]] for (uint j = 0; j < K_QUADS; ++j) {
                        const uint quad = (lane + i * TEAM) * K_QUADS + j;
                        d += dot(recent_quad(false, kvh, t, 4 * quad), q4[min(q0 + quad, q_last)]);
                    }
            } else {
                [[unroll]] for (uint i = 0; i < K_LANE_VECS; ++i)
                    [[unroll]] for (uint j = 0; j < K_QUADS; ++j) {
                        const uint quad = (lane + i * TEAM) * K_QUADS + j;
                        d += dot(kv_quad(kx[b][i], j, K_FMT), q4[min(q0 + quad, q_last)]);
                    }
            }
            for (uint w = TEAM / 2; w > 0; w /= 2) d += subgroupShuffleXor(d, w);
            d *= ks[b] * p.scale;
            if (p.softcap > 0.0) d = p.softcap * tanh(d / p.softcap);
            s[b] = live[b] && t >= first ? d : -1.0 / 0.0;
            mb = max(mb, s[b]);
        }
        if (mb == -1.0 / 0.0) continue;  // no attended row yet (uniform in the team)
        const float c = exp(m - mb);      // 0 while m is -inf
        l *= c;
        [[unroll]] for (uint i = 0; i < V_LANE_VECS * V_QUADS; ++i) acc[i] *= c;
        [[unroll]] for (uint b = 0; b < BATCH; ++b) {
            const uint t = begin + r0 + b * TEAMS;
            const float e = exp(s[b] - mb), w = e * vs[b];
            l += e;
            if (recent[b]) {
                [[unroll]] for (uint i = 0; i < V_LANE_VECS; ++i)
                    [[unroll]] for (uint j = 0; j < V_QUADS; ++j)
                        acc[i * V_QUADS + j] += w * recent_quad(true, kvh, t, 4 * ((lane + i * TEAM) * V_QUADS + j));
            } else {
                [[unroll]] for (uint i = 0; i < V_LANE_VECS; ++i)
                    [[unroll]] for (uint j = 0; j < V_QUADS; ++j) acc[i * V_QUADS + j] += w * kv_quad(vx[b][i], j, V_FMT);
            }
        }
        m = mb;
    }

    // The teams meet: the chunk's max M (every chunk in use holds an attended row), each team's
    // sums rescaled by exp(m - M) (0 for a team that attended nothing), and the V sums added
    // through shared memory, 8 dims of every lane at a time. M and the sum of exps L come from
    // one exchange of each subgroup's maximum and its sum relative to it (one barrier, not a
    // maximum and then a sum).
    const uint slot = (unit * p.n_chunks + chunk) * (p.head_dim + 2);
    const float ms = subgroupMax(m);
    const float ls = subgroupAdd(lane == 0 && m > -1.0 / 0.0 ? l * exp(m - ms) : 0.0);
    if (subgroupElect()) meet_m[gl_SubgroupID] = ms, meet_l[gl_SubgroupID] = ls;
    barrier();
    float M = -1.0 / 0.0, L = 0.0;
    for (uint g = 0; g < gl_NumSubgroups; ++g) M = max(M, meet_m[g]);
    for (uint g = 0; g < gl_NumSubgroups; ++g)
        if (meet_m[g] > -1.0 / 0.0) L += meet_l[g] * exp(meet_m[g] - M);
    const float f = exp(m - M);
    [[unroll]] for (uint a = 0; a < V_LANE_VECS * V_QUADS; a += 2) {
        [[unroll]] for (uint c = 0; c < 4; ++c) {
            sums[tid * 8 + c] = acc[a][c] * f;
            sums[tid * 8 + 4 + c] = acc[a + 1][c] * f;
        }
        barrier();
        // `parts` neighbouring invocations share a dim, each summing every parts-th team, and
        // meet through shuffles: fewer dependent shared-memory loads than one invocation per dim.
        const uint width = TEAM * 8, parts = min(AKUNU_ATTENTION_CHUNK / width, gl_SubgroupSize);
        const uint dim_in = tid / parts, part = tid % parts;
        float total = 0.0;
        if (dim_in < width)
            for (uint g = part; g < TEAMS; g += parts) total += sums[g * width + dim_in];
        for (uint w = parts / 2; w > 0; w /= 2) total += subgroupShuffleXor(total, w);
        // dim_in's lane holds quads a and a + 1 of its vector a / V_QUADS.
        const uint i = a / V_QUADS, dim = ((dim_in / 8) + i * TEAM) * KV_VEC_DIMS(V_FMT) + (a % V_QUADS) * 4 + dim_in % 8;
        if (part == 0 && dim_in < width && dim < p.head_dim) write_dim(slot, dim, total, L, alone);
        barrier();
    }
    if (tid == 0 && !alone) {
        partial[slot + p.head_dim] = M;
        partial[slot + p.head_dim + 1] = L;
    }
}

// out[h] = sum_c acc_c exp(m_c - M) / sum_c l_c exp(m_c - M) over chunks [c_begin, c_end), by
// the whole workgroup, in windows of MERGE_WINDOW chunks: invocation i holds chunk i of a
// window's maximum and sum, and `parts` neighbouring invocations per dim each sum every
// parts-th chunk. The partials are coherent reads from L2, so the merge is a chain of round
// trips at the end of the dispatch: every load that does not wait on M (the first window's
// maxima, sums and MERGE_VALUES values per invocation) is issued at once, so that a head of
// up to MERGE_WINDOW chunks merges after one round trip instead of four; further windows (past
// 64 Ki rows) reload theirs. (A separate merge dispatch, one more dependent dispatch per layer,
// was slower: bench/NOTES.md, the attention merge in the split.)
#ifndef MERGE_WINDOW
#define MERGE_WINDOW AKUNU_ATTENTION_CHUNK
#endif
#define MERGE_VALUES 8
float chunk_factor(float m, float l, float M) { return l > 0.0 ? exp(m - M) : 0.0; }

void merge(uint c_begin, uint c_end) {
    const uint tid = gl_LocalInvocationID.x, stride = p.head_dim + 2, base = unit * p.n_chunks * stride;
    const uint n = c_end - c_begin, first_n = min(n, MERGE_WINDOW);
    uint parts = 1;  // a power of two, inside one subgroup
    while (parts * 2 * p.head_dim <= gl_WorkGroupSize.x && parts * 2 <= gl_SubgroupSize) parts *= 2;
    const uint dim = tid / parts, part = tid % parts;
    const uint at = base + c_begin * stride + min(dim, p.head_dim - 1);  // idle invocations read dim 0's

    // One round trip: chunk tid's maximum and sum, and this invocation's first values.
    const uint own = c_begin + min(tid, first_n - 1);
    const float m0 = partial[base + own * stride + p.head_dim], l0 = tid < first_n ? partial[base + own * stride + p.head_dim + 1] : 0.0;
    float v[MERGE_VALUES];
    [[unroll]] for (uint i = 0; i < MERGE_VALUES; ++i) v[i] = partial[at + min(part + i * parts, first_n - 1) * stride];

    float m = l0 > 0.0 ? m0 : -1.0 / 0.0;
    for (uint c = c_begin + MERGE_WINDOW + tid; c < c_end; c += MERGE_WINDOW)
        if (tid < MERGE_WINDOW && partial[base + c * stride + p.head_dim + 1] > 0.0) m = max(m, partial[base + c * stride + p.head_dim]);
    const float M = workgroup_max(m);
    const float f0 = chunk_factor(m0, l0, M);
    float l = l0 * f0;
    for (uint c = c_begin + MERGE_WINDOW + tid; c < c_end; c += MERGE_WINDOW)
        if (tid < MERGE_WINDOW) {
            const float lc = partial[base + c * stride + p.head_dim + 1];
            l += lc * chunk_factor(partial[base + c * stride + p.head_dim], lc, M);
        }
    if (tid < MERGE_WINDOW) weight[tid] = f0;  // published by workgroup_sum's first barrier
    const float L = workgroup_sum(l);

    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < MERGE_VALUES; ++i)
        if (part + i * parts < first_n) acc += v[i] * weight[part + i * parts];
    for (uint j = part + MERGE_VALUES * parts; j < first_n; j += parts) acc += partial[at + j * stride] * weight[j];
    for (uint c0 = c_begin + MERGE_WINDOW; c0 < c_end; c0 += MERGE_WINDOW) {
        const uint w = min(MERGE_WINDOW, c_end - c0);
        barrier();  // the previous window's factors have been read
        if (tid < w) weight[tid] = chunk_factor(partial[base + (c0 + tid) * stride + p.head_dim],
                                                partial[base + (c0 + tid) * stride + p.head_dim + 1], M);
        barrier();
        for (uint j = part; j < w; j += parts) acc += partial[at + (c0 - c_begin + j) * stride] * weight[j];
    }
    for (uint s = parts / 2; s > 0; s /= 2) acc += subgroupShuffleXor(acc, s);
    if (part == 0 && dim < p.head_dim) out_data[out_at + dim] = acc / L;
}

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
    const uint row = unit / p.n_heads, h = unit % p.n_heads;
    if (row >= min(table_rows, step.n_tokens)) return;  // uniform across the workgroup
    if (batch_rows[row].tiled != 0) return;  // a query tile's row
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
    attend_rows_vec4(kvh, chunk, begin, first, pos, alone);
    if (alone) {
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
    signal_head_written();
}
