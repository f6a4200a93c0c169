// CPU kernels of the encoders (bert, whisper): layernorm, encoder_attention, pool, conv_gather and
// copy_rows, each matching its .comp file (shaders/) over the same workgroups: a row, a (row,
// head), a packed text, 256 elements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

// One workgroup per (query row, head): softmax over the row's span of key rows; with
// kWeights (encoder_attention_weights) the normalized scores are stored too. The workgroups of
// a range go head by head, so that the rows of one span (an encoder window, a packed text)
// share its keys transposed once, which the vectorized scores loop reads.
template <bool kWeights>
void encoder_attention(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<EncoderAttentionParams>();
    const auto& step = *a.at<const StepState>(3);
    const float *q_all = a.at<const float>(0), *kv = a.at<const float>(1);
    const uint32_t* seq = a.at<const uint32_t>(2);
    float* out = a.at<float>(4);
    const size_t rows = std::min(p.rows, step.n_tokens), heads = p.n_heads, hd = p.head_dim;
    const VecMath& vm = vec_math();
    thread_local std::vector<float> scores, kt;  // [keys], [head_dim, keys]
    scores.resize(AKUNU_ENCODER_MAX_KEYS);
    kt.resize(size_t(AKUNU_ENCODER_MAX_KEYS) * hd);
    for (size_t head = 0; head < heads; ++head) {
        size_t kt_start = SIZE_MAX, kt_len = 0;
        for (size_t g = begin + (head + heads - begin % heads) % heads; g < end; g += heads) {
            const size_t row = g / heads;
            if (row >= rows) break;
            const size_t start = seq[2 * row], len = std::min<size_t>(seq[2 * row + 1], AKUNU_ENCODER_MAX_KEYS);
            if (start != kt_start || len != kt_len) {
                for (size_t j = 0; j < len; ++j) {
                    const float* k = kv + (start + j) * p.kv_stride + p.k_offset + head * hd;
                    for (size_t d = 0; d < hd; ++d) kt[d * len + j] = k[d];
                }
                kt_start = start, kt_len = len;
            }
            float* s = scores.data();
            vm.scores(q_all + row * p.q_stride + head * hd, kt.data(), len, hd, len, s);
            float m = -std::numeric_limits<float>::infinity();
            for (size_t j = 0; j < len; ++j) m = std::max(m, s[j] *= p.scale);
            const float inv_total = 1.0f / vm.exp_shifted(s, len, m);
            if constexpr (kWeights) {
                float* w = a.at<float>(5) + g * p.weights_stride;
                for (size_t j = 0; j < len; ++j) w[j] = s[j] * inv_total;
            }
            float* o = out + row * p.out_stride + head * hd;
            std::fill(o, o + hd, 0.0f);
            vm.mix(o, 1.0f, s, kv + start * p.kv_stride + p.v_offset + head * hd, p.kv_stride, len, hd);
            for (size_t d = 0; d < hd; ++d) o[d] *= inv_total;
        }
    }
}

constexpr size_t kGroup = 256;  // local_size_x of conv_gather and copy_rows

// One element per invocation: the im2col columns of a Conv1d (conv_gather.comp).
void conv_gather(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<ConvGatherParams>();
    const auto& step = *a.at<const StepState>(2);
    const float* x = a.at<const float>(0);
    float* out = a.at<float>(1);
    const size_t width = size_t(p.channels) * p.kernel, rows = std::min(p.rows, step.n_tokens);
    for (size_t i = begin * kGroup, e = std::min(end * kGroup, rows * width); i < e; ++i) {
        const size_t row = i / width, col = i % width;
        const size_t w = row / p.t_out, t = row % p.t_out, c = col / p.kernel, k = col % p.kernel;
        const long at = long(t * p.stride + k) - long(p.pad);
        out[i] =
            at >= 0 && at < long(p.t_in) ? x[w * p.window_stride + c * p.c_stride + size_t(at) * p.t_stride] : 0.0f;
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
    add_row({"conv_gather", {conv_gather, 0, 1}});
    add_row({"copy_rows", {copy_rows, 0, 1}});
    add_row({"pool", {pool, 0, 1}});
}

}  // namespace akunu::cpu
