// CPU attention kernels: RoPE with the KV-cache write (rope_kv, rope_only + kv_store for the
// quantized formats, hadamard_rows for the rotated one), decode attention (attention_split,
// which merges its chunks) and prefill attention (flash_attention), each with its .comp file's
// semantics and workgroup geometry.
// Every cache kernel serves the three cache layouts (full, ring, blocks) through one row map
// (kv_rows.h), as the GLSL kernels do through kv_rows.glsl.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "akunu/core/half.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/flash_rows.h"
#include "akunu/cpu/kv_codes.h"
#include "akunu/cpu/kv_recent.h"
#include "akunu/cpu/vec_math.h"
#include "params.h"

namespace akunu::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint32_t k_format(const CpuArgs& a) { return a.variant & 0xFFu; }
uint32_t v_format(const CpuArgs& a) { return (a.variant >> 8) & 0xFFu; }
constexpr uint32_t kRopeOnly = 1u << 16;

// Workgroups of 64 items; per token row: the Q pairs, the K pairs, then the V elements, VEC
// (specialization constant 0) of them an item. A row belongs to the range that holds its first
// item, so one thread rotates and stores it whole, head by head, with vec_math's loops.
void rope_kv(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RopeKvParams>();
    const auto& step = *a.at<const StepState>(5);
    float* qkv = a.at<float>(0);
    const float* cos_t = a.at<const float>(1);
    const float* sin_t = a.at<const float>(2);
    const bool rope_only = a.variant & kRopeOnly;  // bindings 3 and 4 are then a quantized cache, untouched
    const KvRowMap k_rows = kv_row_map(a, 3, -1, p.max_len, p.n_kv_heads, kv_row_bytes(kKvF16, p.head_dim), false);
    const KvRowMap v_rows = kv_row_map(a, 4, -1, p.max_len, p.n_kv_heads, kv_row_bytes(kKvF16, p.head_dim), false);
    const size_t hd = p.head_dim, half_dim = hd / 2, q_dim = p.n_heads * hd, kv_dim = p.n_kv_heads * hd;
    const size_t vec = std::max<uint32_t>(a.spec[0], 1u);
    const size_t per_row = ((p.n_heads + p.n_kv_heads) * half_dim + kv_dim) / vec,
                 rows = std::min(p.rows, step.n_tokens);
    const size_t r1 = std::min(rows, (end * 64 + per_row - 1) / per_row);
    const VecMath& vm = vec_math();
    for (size_t row = (begin * 64 + per_row - 1) / per_row; row < r1; ++row) {
        float* x = qkv + row * p.row_stride;
        const RowPlace place = row_place(a.variant, step, row, p.max_len);
        const size_t pos = place.pos;
        const KvRowMap k_seq = k_rows.from_block(place.first_block), v_seq = v_rows.from_block(place.first_block);
        if (p.rotate)  // the Q heads, then the K heads right after them
            for (size_t head = 0; head < p.n_heads + p.n_kv_heads; ++head)
                vm.rope(x + head * hd, cos_t + pos * half_dim, sin_t + pos * half_dim, half_dim, p.interleaved);
        if (rope_only) continue;
        for (size_t head = 0; head < p.n_kv_heads; ++head) {
            vm.to_half(x + q_dim + head * hd, reinterpret_cast<uint16_t*>(k_seq.at(head, pos).data), hd);
            vm.to_half(x + q_dim + kv_dim + head * hd, reinterpret_cast<uint16_t*>(v_seq.at(head, pos).data), hd);
        }
    }
}

// kv_store: one item per (token row, K or V, kv head, packed word), 64 items per workgroup.
void kv_store(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RopeKvParams>();
    // In blocks the scales sit in the blocks: no scale bindings, and the step follows the tables.
    const auto& step = *a.at<const StepState>(in_blocks(a.variant) ? 3 : 5);
    const float* qkv = a.at<const float>(0);
    const uint32_t kf = k_format(a), vf = v_format(a);
    const KvRowMap k_rows = kv_row_map(a, 1, 3, p.max_len, p.n_kv_heads, kv_row_bytes(kf, p.head_dim), true);
    const KvRowMap v_rows = kv_row_map(a, 2, 4, p.max_len, p.n_kv_heads, kv_row_bytes(vf, p.head_dim), true);
    const size_t k_words_row = p.head_dim / kv_per_word(kf), v_words_row = p.head_dim / kv_per_word(vf);
    const size_t k_side = p.n_kv_heads * k_words_row, per_token = k_side + p.n_kv_heads * v_words_row;
    const size_t rows = std::min(p.rows, step.n_tokens);
    const size_t q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    for (size_t gid = begin * 64, e = std::min(end * 64, rows * per_token); gid < e; ++gid) {
        const size_t row = gid / per_token, r = gid % per_token;
        const bool is_v = r >= k_side;
        const uint32_t f = is_v ? vf : kf;
        const size_t words = is_v ? v_words_row : k_words_row;
        const size_t head = (is_v ? r - k_side : r) / words, w = (is_v ? r - k_side : r) % words;
        const float* src = qkv + row * p.row_stride + q_dim + (is_v ? kv_dim : 0) + head * p.head_dim;
        float amax = 0.0f;
        for (size_t d = 0; d < p.head_dim; ++d) amax = std::max(amax, std::fabs(src[d]));
        const uint16_t scale = float_to_half(amax / kv_qmax(f));
        const float sf = half_to_float(scale), inv = sf > 0.0f ? 1.0f / sf : 0.0f;
        const uint32_t per = kv_per_word(f);
        uint32_t packed = 0;
        for (uint32_t j = 0; j < per; ++j) packed |= kv_encode(src[w * per + j] * inv, f) << (j * kv_bits(f));
        const RowPlace place = row_place(a.variant, step, row, p.max_len);
        const KvRowMap::Row out = (is_v ? v_rows : k_rows).from_block(place.first_block).at(head, place.pos);
        reinterpret_cast<uint32_t*>(out.data)[w] = packed;
        if (w == 0) *out.scale = scale;
    }
}

// kv_recent_store.comp: one item per (token row, element of its [k | v]), 64 items a
// workgroup; a row whose ring row a later row of its sequence's this step takes is skipped.
// A batched step's rows (the batch layout) go to their own sequence's rings.
void kv_recent_store(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RopeKvParams>();  // max_len: the ring's rows per head
    const auto& step = *a.at<const StepState>(3);
    const BatchRow* batch =
        cache_layout(a.variant) == CacheLayout::kBatch ? reinterpret_cast<const BatchRow*>(&step + 1) : nullptr;
    const float* qkv = a.at<const float>(0);
    uint16_t* rings[2] = {a.at<uint16_t>(1), a.at<uint16_t>(2)};
    const size_t hd = p.head_dim, kv_dim = p.n_kv_heads * hd, q_dim = p.n_heads * hd;
    const size_t n = std::min(p.rows, step.n_tokens);
    for (size_t gid = begin * 64, e_end = std::min(end * 64, n * 2 * kv_dim); gid < e_end; ++gid) {
        const size_t row = gid / (2 * kv_dim), e = gid % (2 * kv_dim), i = e % kv_dim;
        const size_t pos = batch ? batch[row].pos : step.pos + row;
        const size_t ring = batch ? size_t(batch[row].seq) * p.n_kv_heads : 0;
        if (pos + p.max_len < (batch ? size_t(batch[row].end) : step.pos + n)) continue;
        rings[e >= kv_dim][((ring + i / hd) * p.max_len + pos % p.max_len) * hd + i % hd] =
            float_to_half(qkv[row * p.row_stride + q_dim + e]);
    }
}

// hadamard_rows.comp: workgroup (row, head) multiplies the head's head_dim values in place by
// the orthonormal Walsh-Hadamard matrix of size p.block (block-diagonal over the head).
void hadamard_rows(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<HadamardRowsParams>();
    const auto& step = *a.at<const StepState>(1);
    float* x = a.at<float>(0);
    const size_t rows = std::min(p.rows, step.n_tokens);
    const float norm = 1.0f / std::sqrt(float(p.block));
    for (size_t g = begin; g < end && g / p.heads < rows; ++g) {
        float* v = x + (g / p.heads) * p.row_stride + (g % p.heads) * p.head_dim;
        for (size_t h = 1; h < p.block; h *= 2)
            for (size_t i = 0; i < p.head_dim / 2; ++i) {
                const size_t at = (i / h) * 2 * h + i % h;
                const float u = v[at], w = v[at + h];
                v[at] = u + w;
                v[at + h] = u - w;
            }
        for (size_t i = 0; i < p.head_dim; ++i) v[i] *= norm;
    }
}

// The K (binding 1, scales 5) or V (2, scales 6) side an attention kernel reads.
KvSide side(const CpuArgs& a, bool v, const AttentionParams& p) {
    const uint32_t f = v ? v_format(a) : k_format(a);
    return KvSide(
        kv_row_map(a, v ? 2 : 1, v ? 6 : 5, p.cache_rows, p.n_kv_heads, kv_row_bytes(f, p.head_dim), f != kKvF16), f,
        p.head_dim);
}

// out[h] from the partials of chunks [c_begin, c_end) of head h (attention_split.comp's merge).
void merge_chunks(const AttentionParams& p, const float* partial, size_t h, size_t c_begin, size_t c_end, float* out) {
    const size_t stride = p.head_dim + 2;
    const float* base = partial + h * p.n_chunks * stride;
    float M = kNegInf, L = 0.0f;
    for (size_t c = c_begin; c < c_end; ++c)
        if (base[c * stride + p.head_dim + 1] > 0.0f) M = std::max(M, base[c * stride + p.head_dim]);
    for (size_t c = c_begin; c < c_end; ++c) {
        const float l = base[c * stride + p.head_dim + 1];
        if (l > 0.0f) L += l * std::exp(base[c * stride + p.head_dim] - M);
    }
    for (size_t d = 0; d < p.head_dim; ++d) {
        float acc = 0.0f;
        for (size_t c = c_begin; c < c_end; ++c) {
            const float l = base[c * stride + p.head_dim + 1];
            if (l > 0.0f) acc += base[c * stride + d] * std::exp(base[c * stride + p.head_dim] - M);
        }
        out[h * p.head_dim + d] = acc / L;
    }
}

// A decode step's keys or values t in [lo, hi) of KV head kvh, a sub-block of kSplitRows
// at a time decoded to f32 rows (the window's from their f16 copies) with each row's scale:
// fn(offset of the sub-block from lo, its rows, [rows, head_dim] values, [rows] scales).
constexpr size_t kSplitRows = 16;

template <typename Fn>
void for_row_blocks(const KvSide& S, const RecentRows& W, bool values, size_t kvh, size_t lo, size_t hi, size_t pos,
                    Fn fn) {
    float rows[kSplitRows * AKUNU_FLASH_MAX_HEAD_DIM], scales[kSplitRows];
    for (size_t t0 = lo; t0 < hi; t0 += kSplitRows) {
        const size_t n = std::min(kSplitRows, hi - t0);
        for (size_t j = 0; j < n; ++j) {
            float* row = rows + j * S.head_dim;
            if (W.holds(t0 + j, pos)) {
                W.row(values, kvh, t0 + j, row);
                scales[j] = 1.0f;
            } else {
                const KvRowMap::Row r = S.rows.at(kvh, t0 + j);
                S.values(r, row);
                scales[j] = S.scale(r);
            }
        }
        fn(t0 - lo, n, rows, scales);
    }
}

// The query heads of one KV head that a decode attention takes together, at most: each key and
// value row is decoded once for all of them (grouped-query attention), their scores and mixes
// run up to kFlashRowsAtOnce heads a pass (flash_rows.h).
constexpr size_t kGroupHeads = 8;
constexpr size_t kChunk = AKUNU_ATTENTION_CHUNK;

// s[i * kChunk + t - lo] = the scaled (and soft-capped) scores of head i of `heads` query heads
// (q, head_dim apart) against keys [lo, hi) of KV head kvh; head_dim is a multiple of 8 (the
// attention launchers check it), as flash_rows' loops take it.
void chunk_scores(const AttentionParams& p, const KvSide& K, const RecentRows& W, size_t kvh, size_t lo, size_t hi,
                  size_t pos, const float* q, size_t heads, float* s) {
    const FlashRows& fr = flash_rows();
    const size_t hd = p.head_dim;
    for_row_blocks(K, W, false, kvh, lo, hi, pos, [&](size_t at, size_t n, const float* k, const float* sc) {
        for (size_t i = 0; i < heads; i += kFlashRowsAtOnce) {
            const size_t rows = std::min(kFlashRowsAtOnce, heads - i);
            fr.dots(q + i * hd, hd, rows, k, hd, hd, n, s + i * kChunk + at, kChunk);
        }
        for (size_t i = 0; i < heads; ++i)
            for (size_t j = 0; j < n; ++j) {
                float d = s[i * kChunk + at + j] * sc[j] * p.scale;
                if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
                s[i * kChunk + at + j] = d;
            }
    });
}

// acc[i * head_dim ...] += sum_t w[i * kChunk + t - lo] v_t for each of `heads` heads over values
// [lo, hi) of KV head kvh (w scaled by each row's scale in place).
void chunk_mix(const KvSide& V, const RecentRows& W, size_t kvh, size_t lo, size_t hi, size_t pos, float* w,
               size_t heads, float* acc) {
    static constexpr float kKeep[kFlashRowsAtOnce] = {1.0f, 1.0f, 1.0f, 1.0f};
    const FlashRows& fr = flash_rows();
    const size_t hd = V.head_dim;
    for_row_blocks(V, W, true, kvh, lo, hi, pos, [&](size_t at, size_t n, const float* v, const float* sc) {
        for (size_t i = 0; i < heads; ++i)
            for (size_t j = 0; j < n; ++j) w[i * kChunk + at + j] *= sc[j];
        for (size_t i = 0; i < heads; i += kFlashRowsAtOnce) {
            const size_t rows = std::min(kFlashRowsAtOnce, heads - i);
            fr.mix(acc + i * hd, hd, kKeep, w + i * kChunk + at, kChunk, rows, v, hd, n, hd);
        }
    });
}

// attention_split: workgroup (query head, chunk of AKUNU_ATTENTION_CHUNK cache rows) writes the
// partial [head_dim values | max | sum of exps]; the last of a head's chunks to finish (an
// atomic counter per head after the partials) merges them into out, and a head whose rows fit
// one chunk writes out directly, as attention_split.comp does. out is binding 7, after a
// quantized cache's scales, else binding 5. The query heads of one KV head go together (up to
// kGroupHeads, in the workgroup of the first; the others' return): the chunk's rows are decoded
// 16 at a time once for all of them, their scores and mixes taken four heads a pass.
void attention_split(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<AttentionParams>();
    const auto& step = *a.at<const StepState>(4);
    const float* q = a.at<const float>(0);
    float* partial = a.at<float>(3);
    const bool scale_bindings = k_format(a) != kKvF16 && !in_blocks(a.variant);
    float* out = a.at<float>(scale_bindings ? 7 : 5);
    uint32_t* arrivals = reinterpret_cast<uint32_t*>(partial + size_t(p.n_heads) * p.n_chunks * (p.head_dim + 2));
    const KvSide K = side(a, false, p), V = side(a, true, p);
    const size_t pos = step.pos, hd = p.head_dim;
    const RecentRows W = recent_rows(a, p, scale_bindings ? 9 : 7, pos);
    const size_t first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const size_t c_begin = first / AKUNU_ATTENTION_CHUNK, c_end = pos / AKUNU_ATTENTION_CHUNK + 1;
    const bool alone = c_end - c_begin == 1;
    const size_t group = p.n_heads / p.n_kv_heads;
    float s[kGroupHeads * kChunk], acc[kGroupHeads * AKUNU_FLASH_MAX_HEAD_DIM];
    const VecMath& vm = vec_math();
    for (size_t g = begin; g < end; ++g) {
        const size_t h0 = g % a.groups[0], chunk = g / a.groups[0];
        // The first head of each run of kGroupHeads heads of a KV head's group attends for the run.
        if ((h0 % group) % kGroupHeads != 0 || chunk < c_begin || chunk >= c_end) continue;
        const size_t kvh = h0 / group, heads = std::min(kGroupHeads, group - h0 % group);
        const size_t cb = chunk * kChunk;
        const size_t lo = std::max(first, cb), hi = std::min({pos + 1, cb + kChunk, size_t(p.max_len)});
        chunk_scores(p, K, W, kvh, lo, hi, pos, q + h0 * hd, heads, s);
        float m[kGroupHeads], l[kGroupHeads];
        for (size_t i = 0; i < heads; ++i) {
            float* si = s + i * kChunk;
            m[i] = hi > lo ? *std::max_element(si, si + (hi - lo)) : kNegInf;
            l[i] = hi > lo ? vm.exp_shifted(si, hi - lo, m[i]) : 0.0f;
        }
        std::fill(acc, acc + heads * hd, 0.0f);
        chunk_mix(V, W, kvh, lo, hi, pos, s, heads, acc);
        for (size_t i = 0; i < heads; ++i) {
            const size_t h = h0 + i;
            const float* acc_h = acc + i * hd;
            if (alone) {
                for (uint32_t d = 0; d < hd; ++d) out[h * hd + d] = acc_h[d] / l[i];
                continue;
            }
            float* part = partial + (h * p.n_chunks + chunk) * (hd + 2);
            std::copy(acc_h, acc_h + hd, part);
            part[hd] = m[i];
            part[hd + 1] = l[i];
            // Release this partial; the head's last chunk to finish acquires the others' and merges.
            std::atomic_ref<uint32_t> arrived(arrivals[h]);
            if (arrived.fetch_add(1, std::memory_order_acq_rel) == c_end - c_begin - 1) {
                arrived.store(0, std::memory_order_relaxed);  // no other chunk of the head touches it again
                merge_chunks(p, partial, h, c_begin, c_end, out);
            }
        }
    }
}

// flash_attention: workgroup (block of AKUNU_FLASH_ROWS query rows, query head). The block walks
// the keys any of its rows sees in tiles of kFlashKeys, each tile's K and V rows decoded once for
// all the rows; the rows' scores and value mixes run a few rows at a time (flash_rows.h), and
// each row keeps the online softmax over the keys it may see (causal, and the sliding window).
constexpr size_t kFlashKeys = 64;

// The query rows of flash_attention's workgroup `block` (query_block.glsl): block `block` of a
// chunk's rows, or in a batched step (kBatch) tile `block` of the step's tile list (binding 5),
// a run of one sequence's rows in that sequence's blocks. rows 0: nothing to attend.
struct QueryBlock {
    size_t first = 0, rows = 0, pos = 0, first_block = 0;
};

QueryBlock query_block(const CpuArgs& a, const StepState& step, const FlashAttentionParams& fp, size_t block,
                       size_t n) {
    constexpr size_t R = AKUNU_FLASH_ROWS;
    if (cache_layout(a.variant) != CacheLayout::kBatch) {
        const size_t first = block * R;
        return first < n ? QueryBlock{first, std::min(R, n - first), step.pos + first, 0} : QueryBlock{};
    }
    const BatchTile& t = a.at<const BatchTile>(5)[block];
    if (t.rows == 0 || t.first_row >= n) return {};
    const RowPlace place = row_place(a.variant, step, t.first_row, fp.a.max_len);
    return {t.first_row, std::min({size_t(t.rows), R, n - t.first_row}), place.pos, place.first_block};
}

void flash_attention(const CpuArgs& a, size_t begin, size_t end) {
    const auto& fp = a.p<FlashAttentionParams>();
    const AttentionParams& p = fp.a;
    const auto& step = *a.at<const StepState>(4);
    const float* q = a.at<const float>(0);
    float* out_data = a.at<float>(3);
    const KvSide K = side(a, false, p), V = side(a, true, p);
    const size_t n = std::min(fp.rows, step.n_tokens), hd = p.head_dim;
    const bool scale_bindings = k_format(a) != kKvF16 && !in_blocks(a.variant);
    const RecentRows W = recent_rows(a, p, scale_bindings ? 7 : 5, step.pos);
    // The end of the keys a row at pos reads from the cache: the window's come from f16 copies.
    auto cache_end = [&](size_t pos) -> size_t { return pos + 1 > W.recent ? pos + 1 - W.recent : 0; };
    auto first_key = [&](size_t pos) -> size_t { return p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0; };
    constexpr size_t R = AKUNU_FLASH_ROWS, D = AKUNU_FLASH_MAX_HEAD_DIM;
    // The block's state and tiles: ~170 KB, so per thread and sized once, not on the stack.
    struct Tiles {
        float o[R][D], m[R], l[R], keep[R], s[R][kFlashKeys], row[D];
        float k[kFlashKeys][D], v[kFlashKeys][D], k_scale[kFlashKeys], v_scale[kFlashKeys];
    };
    thread_local std::unique_ptr<Tiles> tiles;
    if (!tiles) tiles = std::make_unique<Tiles>();
    Tiles& t = *tiles;
    const VecMath& vm = vec_math();
    const FlashRows& fr = flash_rows();
    const bool batch = cache_layout(a.variant) == CacheLayout::kBatch;
    for (size_t g = begin; g < end; ++g) {
        const size_t h = g / a.groups[0];
        const QueryBlock qb = query_block(a, step, fp, g % a.groups[0], n);
        if (qb.rows == 0) continue;
        const size_t kvh = h / (p.n_heads / p.n_kv_heads), rows = qb.rows, r0 = qb.first;
        const KvSide Kb = K.from_block(qb.first_block), Vb = V.from_block(qb.first_block);
        for (size_t r = 0; r < rows; ++r) std::fill(t.o[r], t.o[r] + hd, 0.0f), t.m[r] = kNegInf, t.l[r] = 0.0f;
        // first_key grows with the position, so the block's keys run from its first row's first
        // key to the last key its last row reads from the cache: each is one some row sees. A
        // batch's tile starts at the key tile below it (query_block.glsl block_keys_begin), so a
        // row's keys sum in the same tiles wherever its tile starts.
        const size_t keys_end = cache_end(qb.pos + rows - 1), keys_begin = first_key(qb.pos);
        for (size_t t0 = batch ? keys_begin / kFlashKeys * kFlashKeys : keys_begin; t0 < keys_end; t0 += kFlashKeys) {
            const size_t tile = std::min(kFlashKeys, keys_end - t0);
            for (size_t j = 0; j < tile; ++j) {
                const KvRowMap::Row kr = Kb.rows.at(kvh, t0 + j), vr = Vb.rows.at(kvh, t0 + j);
                Kb.values(kr, t.k[j]);
                t.k_scale[j] = p.scale * Kb.scale(kr);
                Vb.values(vr, t.v[j]);
                t.v_scale[j] = Vb.scale(vr);
            }
            // The rows' scores against every key of the tile, four rows a pass; then each row's
            // weights (zero for the keys it does not see) and the values mixed in, four rows a pass.
            for (size_t r = 0; r < rows; r += kFlashRowsAtOnce)
                fr.dots(q + (r0 + r) * fp.q_stride + h * hd, fp.q_stride, std::min(kFlashRowsAtOnce, rows - r), t.k[0],
                        D, hd, tile, t.s[r], kFlashKeys);
            for (size_t r = 0; r < rows; ++r) {
                const size_t pos = qb.pos + r, end_key = cache_end(pos);
                const size_t j0 = std::min(std::max(first_key(pos), t0) - t0, tile);
                const size_t j1 = std::max(std::min(end_key, t0 + tile), t0) - t0;
                float* s = t.s[r];
                if (j0 >= j1) {  // none of this tile's keys is visible to the row: it stays as it is
                    std::fill(s, s + tile, 0.0f), t.keep[r] = 1.0f;
                    continue;
                }
                float tile_max = kNegInf;
                for (size_t j = j0; j < j1; ++j) {
                    float d = s[j] * t.k_scale[j];
                    if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
                    s[j] = d;
                    tile_max = std::max(tile_max, d);
                }
                const float m_new = std::max(t.m[r], tile_max);
                t.keep[r] = std::exp(t.m[r] - m_new);
                t.l[r] = t.l[r] * t.keep[r] + vm.exp_shifted(s + j0, j1 - j0, m_new);
                for (size_t j = j0; j < j1; ++j) s[j] *= t.v_scale[j];
                std::fill(s, s + j0, 0.0f), std::fill(s + j1, s + tile, 0.0f);
                t.m[r] = m_new;
            }
            for (size_t r = 0; r < rows; r += kFlashRowsAtOnce)
                fr.mix(t.o[r], D, &t.keep[r], t.s[r], kFlashKeys, std::min(kFlashRowsAtOnce, rows - r), t.v[0], D, tile,
                       hd);
        }
        for (size_t r = 0; r < rows && W.recent > 0; ++r) {  // the window's keys, from their f16 copies
            const size_t pos = qb.pos + r;
            const float* qr = q + (r0 + r) * fp.q_stride + h * hd;
            for (size_t key = std::max(first_key(pos), cache_end(pos)); key <= pos; ++key) {
                W.row(false, kvh, key, t.row);
                float d = 0.0f;
                for (size_t i = 0; i < hd; ++i) d += qr[i] * t.row[i];
                d *= p.scale;
                if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
                const float m_new = std::max(t.m[r], d), correction = std::exp(t.m[r] - m_new), w = std::exp(d - m_new);
                W.row(true, kvh, key, t.row);
                for (size_t i = 0; i < hd; ++i) t.o[r][i] = t.o[r][i] * correction + w * t.row[i];
                t.l[r] = t.l[r] * correction + w;
                t.m[r] = m_new;
            }
        }
        for (size_t r = 0; r < rows; ++r) {
            float* out = out_data + (r0 + r) * fp.out_stride + h * hd;
            for (size_t i = 0; i < hd; ++i) out[i] = t.o[r][i] / t.l[r];
        }
    }
}

// attention_rows: workgroup (row, query head) of a batched step, row-major, but for rows marked
// tiled (a query tile's, which flash_attention attends); the row attends its own sequence's
// keys up to its position with an online softmax (attention_rows.comp), a chunk of
// AKUNU_ATTENTION_CHUNK keys at a time as attention_split takes one, the query heads of one KV
// head together: the chunk's scores over sub-blocks of decoded rows, their exponentials in one
// vectorized pass, one rescale of the running sums a chunk, then the values mixed in.
void attention_rows(const CpuArgs& a, size_t begin, size_t end) {
    const auto& fp = a.p<FlashAttentionParams>();
    const AttentionParams& p = fp.a;
    const auto& step = *a.at<const StepState>(4);
    const float* q = a.at<const float>(0);
    float* out_data = a.at<float>(3);
    const KvSide K = side(a, false, p), V = side(a, true, p);
    const size_t n = std::min(fp.rows, step.n_tokens), hd = p.head_dim;
    const RecentRows window = recent_rows(a, p, 5, 0);
    const BatchRow* batch_rows = reinterpret_cast<const BatchRow*>(&step + 1);
    const VecMath& vm = vec_math();
    const size_t group = p.n_heads / p.n_kv_heads;
    float s[kGroupHeads * kChunk], o[kGroupHeads * AKUNU_FLASH_MAX_HEAD_DIM];
    for (size_t g = begin; g < end; ++g) {
        const size_t row = g / p.n_heads, h0 = g % p.n_heads;
        if (row >= n) break;
        // The first head of each run of kGroupHeads heads of a KV head's group attends for the run.
        if (batch_rows[row].tiled || (h0 % group) % kGroupHeads != 0) continue;  // tiled: flash_attention's
        const size_t kvh = h0 / group, heads = std::min(kGroupHeads, group - h0 % group);
        const RowPlace place = row_place(a.variant, step, row, p.max_len);
        // The row's own sequence's blocks.
        const KvSide Ks = K.from_block(place.first_block), Vs = V.from_block(place.first_block);
        const size_t pos = place.pos;
        const BatchRow& br = batch_rows[row];
        const RecentRows W = window.for_row(br.seq, row - (pos - br.first), br.first);
        const size_t first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
        std::fill(o, o + heads * hd, 0.0f);
        float m[kGroupHeads], l[kGroupHeads];
        std::fill(m, m + heads, kNegInf), std::fill(l, l + heads, 0.0f);
        for (size_t lo = first; lo <= pos; lo += kChunk) {
            const size_t hi = std::min(pos + 1, lo + kChunk);
            chunk_scores(p, Ks, W, kvh, lo, hi, pos, q + row * fp.q_stride + h0 * hd, heads, s);
            for (size_t i = 0; i < heads; ++i) {
                float* si = s + i * kChunk;
                const float m_new = std::max(m[i], *std::max_element(si, si + (hi - lo)));
                const float correction = std::exp(m[i] - m_new), chunk_sum = vm.exp_shifted(si, hi - lo, m_new);
                for (size_t d = 0; d < hd; ++d) o[i * hd + d] *= correction;
                l[i] = l[i] * correction + chunk_sum;
                m[i] = m_new;
            }
            chunk_mix(Vs, W, kvh, lo, hi, pos, s, heads, o);
        }
        for (size_t i = 0; i < heads; ++i) {
            float* out = out_data + row * fp.out_stride + (h0 + i) * hd;
            for (size_t d = 0; d < hd; ++d) out[d] = o[i * hd + d] / l[i];
        }
    }
}

}  // namespace

void register_attention(void (*add_row)(const KernelRow&)) {
    struct Fmt {
        const char* suffix;
        uint32_t k, v;
    };
    const Fmt formats[] = {{"", kKvF16, kKvF16},     {"_q8", kKvQ8, kKvQ8},        {"_int4", kKvInt4, kKvInt4},
                           {"_fp4", kKvFp4, kKvFp4}, {"_q8_int4", kKvQ8, kKvInt4}, {"_q8_fp4", kKvQ8, kKvFp4}};
    struct Layout {
        const char* suffix;
        CacheLayout layout;
    };
    const Layout layouts[] = {
        {"", CacheLayout::kFull}, {"_ring", CacheLayout::kRing}, {"_blocks", CacheLayout::kBlocks}};
    for (const Layout& l : layouts) {
        const uint32_t at = uint32_t(l.layout) << kCacheLayoutShift;
        for (const Fmt& f : formats) {
            const uint32_t variant = f.k | (f.v << 8) | at;
            const std::string name = std::string(f.suffix) + l.suffix;  // "_q8_int4_blocks"
            add_row({("attention_split" + name).c_str(), {attention_split, variant, 1}});
            add_row({("flash_attention" + name).c_str(), {flash_attention, variant, 1}});
            if (f.k == kKvF16) continue;
            add_row({("kv_store" + name).c_str(), {kv_store, variant, 16}});
            add_row({("attention_split" + name + "_recent").c_str(), {attention_split, variant | kRecent, 1}});
            add_row({("flash_attention" + name + "_recent").c_str(), {flash_attention, variant | kRecent, 1}});
        }
        add_row({("rope_kv" + std::string(l.suffix)).c_str(), {rope_kv, at, 16}});
    }
    add_row({"kv_recent_store", {kv_recent_store, 0, 16}});
    add_row({"rope_only", {rope_kv, kRopeOnly, 16}});
    add_row({"hadamard_rows", {hadamard_rows, 0, 16}});
    // A batched step's cache: blocks of a pool, each row in its own sequence's (kv_rows.h).
    const uint32_t batch = uint32_t(CacheLayout::kBatch) << kCacheLayoutShift;
    for (const Fmt& f : formats) {
        const uint32_t variant = f.k | (f.v << 8) | batch;
        add_row({("attention_rows" + std::string(f.suffix) + "_batch").c_str(), {attention_rows, variant, 1}});
        add_row({("flash_attention" + std::string(f.suffix) + "_batch").c_str(), {flash_attention, variant, 1}});
        if (f.k == kKvF16) continue;
        add_row({("kv_store" + std::string(f.suffix) + "_batch").c_str(), {kv_store, variant, 16}});
        add_row({("attention_rows" + std::string(f.suffix) + "_batch_recent").c_str(),
                 {attention_rows, variant | kRecent, 1}});
    }
    add_row({"kv_recent_store_batch", {kv_recent_store, batch, 16}});
    add_row({"rope_kv_batch", {rope_kv, batch, 16}});
    add_row({"rope_only_batch", {rope_kv, kRopeOnly | batch, 16}});
}

}  // namespace akunu::cpu
