// CPU kernels of the encoders (bert): layernorm, encoder_attention and pool, each matching its
// .comp file (shaders/) over the same workgroups: a row, a (row, head), a packed text.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// One workgroup per (token row, head): softmax over the rows of the token's own sequence.
void encoder_attention(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<EncoderAttentionParams>();
    const auto& step = *a.at<const StepState>(2);
    const float* qkv = a.at<const float>(0);
    const uint32_t* seq = a.at<const uint32_t>(1);
    float* out = a.at<float>(3);
    thread_local std::vector<float> scores;
    scores.resize(AKUNU_ENCODER_MAX_KEYS);
    for (size_t g = begin; g < end; ++g) {
        const size_t row = g / p.n_heads, head = g % p.n_heads;
        if (row >= std::min(p.rows, step.n_tokens)) continue;
        const size_t start = seq[2 * row], len = std::min<size_t>(seq[2 * row + 1], AKUNU_ENCODER_MAX_KEYS);
        const float* q = qkv + row * p.q_stride + head * p.head_dim;
        float m = -std::numeric_limits<float>::infinity();
        for (size_t j = 0; j < len; ++j) {
            const float* k = qkv + (start + j) * p.q_stride + p.k_offset + head * p.head_dim;
            float s = 0.0f;
            for (size_t d = 0; d < p.head_dim; ++d) s += q[d] * k[d];
            scores[j] = s * p.scale;
            m = std::max(m, scores[j]);
        }
        float total = 0.0f;
        for (size_t j = 0; j < len; ++j) total += scores[j] = std::exp(scores[j] - m);
        const float inv_total = 1.0f / total;
        const float* v = qkv + start * p.q_stride + p.v_offset + head * p.head_dim;
        float* o = out + row * p.out_stride + head * p.head_dim;
        for (size_t d = 0; d < p.head_dim; ++d) {
            float acc = 0.0f;
            for (size_t j = 0; j < len; ++j) acc += scores[j] * v[j * p.q_stride + d];
            o[d] = acc * inv_total;
        }
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
    add_row({"encoder_attention", {encoder_attention, 0, 1}});
    add_row({"pool", {pool, 0, 1}});
}

}  // namespace akunu::cpu
