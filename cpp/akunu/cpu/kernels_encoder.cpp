// CPU kernels of the encoders (bert, whisper): layernorm, encoder_attention, pool, conv_gather and
// copy_rows, each matching its .comp file (shaders/) over the same workgroups: a row, a (row,
// head), a packed text, 256 elements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/flash_rows.h"
#include "akunu/cpu/gemm_bf16.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// One workgroup per row: y = (x - mean) * rsqrt(var + eps) * w + b; y may be x.
void layernorm(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<LayerNormParams>();
    const auto& step = *a.at<const StepState>(4);
    const float *w = a.at<const float>(1), *bias = a.at<const float>(2);
    for (size_t row = begin; row < std::min<size_t>(end, std::min(p.rows, step.n_tokens)); ++row) {
        const float* x = a.at<const float>(0) + row * p.dim;
        float* y = a.at<float>(3) + row * p.dim;
        float sum = 0.0f;
        for (size_t i = 0; i < p.dim; ++i) sum += x[i];
        const float mean = sum / float(p.dim);
        float sum_sq = 0.0f;
        for (size_t i = 0; i < p.dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
        const float scale = 1.0f / std::sqrt(sum_sq / float(p.dim) + p.eps);
        for (size_t i = 0; i < p.dim; ++i) y[i] = (x[i] - mean) * scale * w[i] + bias[i];
    }
}

// ---- encoder_attention ---------------------------------------------------------------------
// One workgroup per (query row, head): softmax over the row's span of key rows; with kWeights
// (encoder_attention_weights) the normalized scores are stored too. The workgroups of a range
// go head by head. Consecutive rows that share a span (an encoder window, a packed text) go in
// blocks through the GEMM's register-blocked tile (row_dot.h gemm_tile): S = Q K^T over panels
// of 64 keys, a softmax per row, O = P V. A row alone on its span (a decoder step) takes dot
// products against the key rows as they lie; a short run of rows on one span (the beams of one
// audio window in a decoder step) goes whole to the range that holds its first row, whose rows
// then share each key and value row they read (flash_rows.h).

constexpr size_t kSpanBlockRows = 24;  // query rows per block (a multiple of the tile's 6)
constexpr size_t kMinBlockRows = 8;  // fewer rows on a span: the per-row path

// A thread's buffers, 64-byte aligned (the AVX-512 tiles load whole lines), sized once.
template <class T>
T* aligned_buffer(std::vector<T>& v, size_t n) {
    if (v.size() < n + 16) v.resize(n + 16);
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63));
}

// A span's keys and values as bf16 pair panels (gemm_bf16.h), for blocks whose products run in
// bf16 (tuning bf16_gemm): K pairs over the head's dimensions, V pairs over the keys; the
// query and weight rows of each block are rounded the same way.
struct Bf16Panels {
    uint32_t (*k)[kGemmTile];  // [panel][hd / 2][64]
    uint32_t (*v)[kGemmTile];  // [len / 2][64]
    uint32_t *q, *p;  // a block's rows: [rows][hd / 2], [rows][ls / 2]
    size_t hp;  // pairs per key column: (hd + 1) / 2
};

Bf16Panels bf16_panels(const float* kp, size_t panels, size_t hd, const float* vp, size_t len, size_t ls) {
    thread_local std::vector<uint32_t> kbuf, vbuf, qbuf, pbuf;
    using Panel = uint32_t (*)[kGemmTile];
    const size_t hp = (hd + 1) / 2;
    const Bf16Panels b{reinterpret_cast<Panel>(aligned_buffer(kbuf, panels * hp * kGemmTile)),
                       reinterpret_cast<Panel>(aligned_buffer(vbuf, (len + 1) / 2 * kGemmTile)),
                       aligned_buffer(qbuf, kSpanBlockRows * hp), aligned_buffer(pbuf, kSpanBlockRows * ls / 2), hp};
    for (size_t pb = 0; pb < panels; ++pb) bf16_panel(kp + pb * hd * kGemmTile, hd, b.k + pb * hp);
    bf16_panel(vp, len, b.v);
    return b;
}

struct SpanArgs {
    const EncoderAttentionParams& p;
    const float *q, *kv;
    float *out, *weights;
    size_t head, start, len;
};

// Rows [r0, r1) of one head over one span, in blocks of kSpanBlockRows (head_dim <= 64); with
// kBf16 the two products take bf16 pairs.
template <bool kWeights, bool kBf16>
void span_block(const SpanArgs& s, size_t r0, size_t r1) {
    const auto& p = s.p;
    const size_t hd = p.head_dim, panels = (s.len + kGemmTile - 1) / kGemmTile, ls = panels * kGemmTile;
    const GemmTileFn tile = gemm_tile();
    const VecMath& vm = vec_math();
    thread_local std::vector<float> kbuf, vbuf, sbuf, abuf;
    float* kp = aligned_buffer(kbuf, panels * hd * kGemmTile);  // [panel][hd][64] keys transposed
    float* vp = aligned_buffer(vbuf, s.len * kGemmTile);  // [len][64] values, zero past hd
    float* sc = aligned_buffer(sbuf, kSpanBlockRows * ls);  // [rows][ls] scores, then weights
    float* acc = aligned_buffer(abuf, kSpanBlockRows * kGemmTile);  // [rows][64]
    std::fill(kp, kp + panels * hd * kGemmTile, 0.0f);
    for (size_t j = 0; j < s.len; ++j) {
        const float* row = s.kv + (s.start + j) * p.kv_stride + s.head * hd;
        float* kcol = kp + (j / kGemmTile) * hd * kGemmTile + j % kGemmTile;
        for (size_t d = 0; d < hd; ++d) kcol[d * kGemmTile] = row[p.k_offset + d];
        std::copy(row + p.v_offset, row + p.v_offset + hd, vp + j * kGemmTile);
        std::fill(vp + j * kGemmTile + hd, vp + (j + 1) * kGemmTile, 0.0f);
    }
    const Bf16Panels b2 = kBf16 ? bf16_panels(kp, panels, hd, vp, s.len, ls) : Bf16Panels{};
    for (size_t b0 = r0; b0 < r1; b0 += kSpanBlockRows) {
        const size_t m = std::min(kSpanBlockRows, r1 - b0);
        const float* q = s.q + b0 * p.q_stride + s.head * hd;
        for (size_t i = 0; i < m && kBf16; ++i) bf16_pairs(q + i * p.q_stride, hd, b2.q + i * b2.hp);
        for (size_t pb = 0; pb < panels; ++pb) {
            std::fill(acc, acc + m * kGemmTile, 0.0f);
            if constexpr (kBf16)
                bf16_tile(b2.k + pb * b2.hp, b2.hp, b2.q, b2.hp, m, acc);
            else
                tile(kp + pb * hd * kGemmTile, kGemmTile, q, p.q_stride, m, hd, acc);
            const size_t n = std::min(kGemmTile, s.len - pb * kGemmTile);
            for (size_t i = 0; i < m; ++i)
                std::copy(acc + i * kGemmTile, acc + i * kGemmTile + n, sc + i * ls + pb * kGemmTile);
        }
        float inv[kSpanBlockRows];
        for (size_t i = 0; i < m; ++i) {
            float* si = sc + i * ls;
            const float mx = vm.scale_max(si, s.len, p.scale);
            inv[i] = 1.0f / vm.exp_shifted(si, s.len, mx);
            if constexpr (kWeights) {
                float* w = s.weights + ((b0 + i) * p.n_heads + s.head) * p.weights_stride;
                for (size_t j = 0; j < s.len; ++j) w[j] = si[j] * inv[i];
            }
        }
        std::fill(acc, acc + m * kGemmTile, 0.0f);
        if constexpr (kBf16) {
            for (size_t i = 0; i < m; ++i) bf16_pairs(sc + i * ls, s.len, b2.p + i * ls / 2);
            bf16_tile(b2.v, (s.len + 1) / 2, b2.p, ls / 2, m, acc);
        } else {
            tile(vp, hd, sc, ls, m, s.len, acc);
        }
        for (size_t i = 0; i < m; ++i) {
            float* o = s.out + (b0 + i) * p.out_stride + s.head * hd;
            for (size_t d = 0; d < hd; ++d) o[d] = acc[i * kGemmTile + d] * inv[i];
        }
    }
}

// One row over its span: scores as dot products with the key rows, softmax, the mix of values.
template <bool kWeights>
void span_row(const SpanArgs& s, size_t row) {
    const auto& p = s.p;
    const size_t hd = p.head_dim;
    const VecMath& vm = vec_math();
    thread_local std::vector<float> scores;
    scores.resize(AKUNU_ENCODER_MAX_KEYS);
    float* sc = scores.data();
    vm.dots(s.q + row * p.q_stride + s.head * hd, s.kv + s.start * p.kv_stride + p.k_offset + s.head * hd, p.kv_stride,
            hd, s.len, sc);
    const float mx = vm.scale_max(sc, s.len, p.scale);
    const float inv_total = 1.0f / vm.exp_shifted(sc, s.len, mx);
    if constexpr (kWeights) {
        float* w = s.weights + (row * p.n_heads + s.head) * p.weights_stride;
        for (size_t j = 0; j < s.len; ++j) w[j] = sc[j] * inv_total;
    }
    float* o = s.out + row * p.out_stride + s.head * hd;
    std::fill(o, o + hd, 0.0f);
    vm.mix(o, 1.0f, sc, s.kv + s.start * p.kv_stride + p.v_offset + s.head * hd, p.kv_stride, s.len, hd);
    for (size_t d = 0; d < hd; ++d) o[d] *= inv_total;
}

// Rows [r0, r1) of one head on one span, up to kFlashRowsAtOnce at a time: the rows' scores and
// value mixes read each key and value row once for them all (head_dim a multiple of 8). The
// products are span_row's; AVX-512 adds each score's up in another order (flash_rows.h).
template <bool kWeights>
void span_rows(const SpanArgs& s, size_t r0, size_t r1) {
    const auto& p = s.p;
    const size_t hd = p.head_dim, len = s.len, m = r1 - r0;
    const VecMath& vm = vec_math();
    const FlashRows& fr = flash_rows();
    thread_local std::vector<float> scores;
    scores.resize(kMinBlockRows * AKUNU_ENCODER_MAX_KEYS);
    float* sc = scores.data();  // [m][len]
    const float* k = s.kv + s.start * p.kv_stride + p.k_offset + s.head * hd;
    const float* v = s.kv + s.start * p.kv_stride + p.v_offset + s.head * hd;
    float* out = s.out + r0 * p.out_stride + s.head * hd;
    for (size_t i = 0; i < m; i += kFlashRowsAtOnce)
        fr.dots_streamed(s.q + (r0 + i) * p.q_stride + s.head * hd, p.q_stride, std::min(kFlashRowsAtOnce, m - i), k,
                         p.kv_stride, hd, len, sc + i * len, len);
    float keep[kMinBlockRows], inv[kMinBlockRows];
    for (size_t i = 0; i < m; ++i) {
        float* si = sc + i * len;
        const float mx = vm.scale_max(si, len, p.scale);
        inv[i] = 1.0f / vm.exp_shifted(si, len, mx);
        if constexpr (kWeights) {
            float* w = s.weights + ((r0 + i) * p.n_heads + s.head) * p.weights_stride;
            for (size_t j = 0; j < len; ++j) w[j] = si[j] * inv[i];
        }
        keep[i] = 1.0f;
        std::fill(out + i * p.out_stride, out + i * p.out_stride + hd, 0.0f);
    }
    for (size_t i = 0; i < m; i += kFlashRowsAtOnce)
        fr.mix_streamed(out + i * p.out_stride, p.out_stride, keep + i, sc + i * len, len,
                        std::min(kFlashRowsAtOnce, m - i), v, p.kv_stride, len, hd);
    for (size_t i = 0; i < m; ++i)
        for (size_t d = 0; d < hd; ++d) out[i * p.out_stride + d] *= inv[i];
}

// Which rows of the run [first, last) on one span the range reaching `row` (the first of its
// rows there) computes, and how. The grouping of a run's rows never depends on where the
// ranges split it (a row's result then does not depend on the thread count or on which
// commands ran inline): a short run goes whole to the range that holds its first row (its rows
// share each key and value row, flash_rows.h); a longer one goes in blocks of kSpanBlockRows
// counted from the run's first row, each to the range that holds the block's first row
// (span_block: the GEMM's tile), all of a range's blocks in one span_block call, which packs
// the span's keys and values once for them; without blocks (head_dim past the tile, an empty
// span) each row alone.
struct Rows {
    enum Path { kNone, kFlashRows, kBlock, kEach } path;
    size_t r0, r1, next;  // the rows computed, and the range's next row to look at
};

// For the range's rows [row, end_here) of the run.
Rows rows_for(size_t first, size_t last, size_t row, size_t end_here, bool blocks) {
    if (last - first < kMinBlockRows)
        return first == row ? Rows{last - first > 1 ? Rows::kFlashRows : Rows::kEach, first, last, end_here}
                            : Rows{Rows::kNone, 0, 0, end_here};
    if (!blocks) return Rows{Rows::kEach, row, end_here, end_here};
    const auto block_start = [&](size_t r) { return first + (r - first) / kSpanBlockRows * kSpanBlockRows; };
    const size_t b0 = block_start(row) == row ? row : block_start(row) + kSpanBlockRows;  // the first block it starts
    if (b0 >= end_here) return Rows{Rows::kNone, 0, 0, end_here};
    return Rows{Rows::kBlock, b0, std::min(last, block_start(end_here - 1) + kSpanBlockRows), end_here};
}

template <bool kWeights, bool kBf16 = false>
void encoder_attention(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<EncoderAttentionParams>();
    const auto& step = *a.at<const StepState>(3);
    const uint32_t* seq = a.at<const uint32_t>(2);
    const size_t rows = std::min(p.rows, step.n_tokens), heads = p.n_heads;
    float* weights = kWeights ? a.at<float>(5) : nullptr;
    for (size_t head = 0; head < heads; ++head) {
        // The rows whose workgroup (row * heads + head) lies in [begin, end).
        const size_t lo = begin > head ? (begin - head + heads - 1) / heads : 0;
        const size_t hi = std::min(rows, end > head ? (end - head + heads - 1) / heads : 0);
        for (size_t row = lo; row < hi;) {
            const uint32_t start = seq[2 * row], span = seq[2 * row + 1];
            auto on_span = [&](size_t r) { return seq[2 * r] == start && seq[2 * r + 1] == span; };
            size_t first = row, last = row + 1;  // the whole run of rows on this span
            while (first > 0 && on_span(first - 1)) --first;
            while (last < rows && on_span(last)) ++last;
            const SpanArgs s{p,
                             a.at<const float>(0),
                             a.at<const float>(1),
                             a.at<float>(4),
                             weights,
                             head,
                             start,
                             std::min<size_t>(span, AKUNU_ENCODER_MAX_KEYS)};
            const bool blocks = p.head_dim <= kGemmTile && s.len > 0;
            for (const size_t end_here = std::min(last, hi); row < end_here;) {  // this range's rows of the run
                const Rows r = rows_for(first, last, row, end_here, blocks);
                if (r.path == Rows::kFlashRows && p.head_dim % 8 == 0 && s.len > 0)
                    span_rows<kWeights>(s, r.r0, r.r1);
                else if (r.path == Rows::kBlock)
                    span_block<kWeights, kBf16>(s, r.r0, r.r1);
                else if (r.path != Rows::kNone)
                    for (size_t i = r.r0; i < r.r1; ++i) span_row<kWeights>(s, i);
                row = r.next;
            }
        }
    }
}

constexpr size_t kGroup = 256;  // local_size_x of conv_gather and copy_rows

// One element per invocation: the im2col columns of a Conv1d (conv_gather.comp), here a run of
// a row's columns at a time (channel c, tap k: column c * kernel + k), with no division per element.
void conv_gather(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<ConvGatherParams>();
    const auto& step = *a.at<const StepState>(2);
    const float* x = a.at<const float>(0);
    float* out = a.at<float>(1);
    const size_t width = size_t(p.channels) * p.kernel, rows = std::min(p.rows, step.n_tokens);
    for (size_t i = begin * kGroup, e = std::min(end * kGroup, rows * width); i < e;) {
        const size_t row = i / width, n = std::min(width - i % width, e - i);
        const size_t w = row / p.t_out, t = row % p.t_out;
        size_t c = i % width / p.kernel, k = i % width % p.kernel;
        for (const size_t last = i + n; i < last; ++i) {
            const long at = long(t * p.stride + k) - long(p.pad);
            out[i] =
                at >= 0 && at < long(p.t_in) ? x[w * p.window_stride + c * p.c_stride + size_t(at) * p.t_stride] : 0.0f;
            if (++k == p.kernel) k = 0, ++c;
        }
    }
}

// One element per invocation: rows through row indices (copy_rows.comp).
void copy_rows(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<CopyRowsParams>();
    const auto& step = *a.at<const StepState>(4);
    const float* src = a.at<const float>(0);
    const uint32_t *src_rows = a.at<const uint32_t>(1), *dst_rows = a.at<const uint32_t>(3);
    float* dst = a.at<float>(2);
    const size_t rows = std::min(p.rows, step.n_tokens);
    for (size_t i = begin * kGroup, e = std::min(end * kGroup, rows * p.n); i < e; ++i) {
        const size_t row = i / p.n, col = i % p.n;
        dst[size_t(dst_rows[row]) * p.dst_stride + col] = src[size_t(src_rows[row]) * p.src_stride + col];
    }
}

// One workgroup per packed text: the mean of its rows or its first row, optionally L2-normalized.
void pool(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<PoolParams>();
    const float* h = a.at<const float>(0);
    const uint32_t* texts = a.at<const uint32_t>(1);
    float* out = a.at<float>(2);
    const bool cls = texts[1] == 1, normalize = texts[2] == 1;
    for (size_t t = begin; t < std::min<size_t>(end, std::min(texts[0], p.max_texts)); ++t) {
        const size_t start = texts[AKUNU_POOL_HEADER + 2 * t], rows = cls ? 1 : texts[AKUNU_POOL_HEADER + 2 * t + 1];
        float* o = out + t * p.dim;
        float sum_sq = 0.0f;
        for (size_t d = 0; d < p.dim; ++d) {
            float acc = 0.0f;
            for (size_t r = 0; r < rows; ++r) acc += h[(start + r) * p.dim + d];
            o[d] = acc / float(rows);
            sum_sq += o[d] * o[d];
        }
        if (!normalize) continue;
        const float scale = 1.0f / std::max(std::sqrt(sum_sq), 1e-12f);
        for (size_t d = 0; d < p.dim; ++d) o[d] *= scale;
    }
}

}  // namespace

void register_encoder(void (*add_row)(const KernelRow&)) {
    add_row({"layernorm", {layernorm, 0, 1}});
    add_row({"encoder_attention", {encoder_attention<false>, 0, 1}});
    add_row({"encoder_attention_weights", {encoder_attention<true>, 0, 1}});
    // The span blocks' products as bf16 pairs (gemm_bf16.h), which a device runs under tuning
    // bf16_gemm.
    if (use_avx512_bf16()) {
        add_row({"encoder_attention_bf16", {encoder_attention<false, true>, 0, 1}});
        add_row({"encoder_attention_weights_bf16", {encoder_attention<true, true>, 0, 1}});
    }
    add_row({"conv_gather", {conv_gather, 0, 1}});
    add_row({"copy_rows", {copy_rows, 0, 1}});
    add_row({"pool", {pool, 0, 1}});
}

}  // namespace akunu::cpu
