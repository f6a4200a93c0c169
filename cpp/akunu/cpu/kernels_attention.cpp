// CPU attention kernels: RoPE with the KV-cache write (rope_kv, rope_only + kv_store for the
// quantized formats), decode attention (attention_split + attention_merge) and prefill
// attention (flash_attention), each with its .comp file's semantics and workgroup geometry.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "akunu/cpu/cpu_kernel.h"
#include "akunu/cpu/kv_codes.h"
#include "params.h"

namespace akunu::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint32_t k_format(const CpuArgs& a) { return a.variant & 0xFFu; }
uint32_t v_format(const CpuArgs& a) { return (a.variant >> 8) & 0xFFu; }
constexpr uint32_t kRopeOnly = 1u << 16;

// Workgroups of 64 items; per token row: the Q pairs, the K pairs, then the V elements.
void rope_kv(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RopeKvParams>();
    const auto& step = *a.at<const StepState>(5);
    float* qkv = a.at<float>(0);
    const float* cos_t = a.at<const float>(1);
    const float* sin_t = a.at<const float>(2);
    uint16_t* k_cache = a.at<uint16_t>(3);
    uint16_t* v_cache = a.at<uint16_t>(4);
    const bool rope_only = a.variant & kRopeOnly;
    const size_t half_dim = p.head_dim / 2, q_pairs = p.n_heads * half_dim, k_pairs = p.n_kv_heads * half_dim;
    const size_t q_dim = p.n_heads * p.head_dim, kv_dim = p.n_kv_heads * p.head_dim;
    const size_t per_row = q_pairs + k_pairs + kv_dim, rows = std::min(p.rows, step.n_tokens);
    for (size_t gid = begin * 64, e = std::min(end * 64, rows * per_row); gid < e; ++gid) {
        const size_t row = gid / per_row, i = gid % per_row;
        float* x = qkv + row * p.row_stride;
        const size_t pos = step.pos + row;
        if (i < q_pairs + k_pairs) {
            const bool is_k = i >= q_pairs;
            const size_t pair = is_k ? i - q_pairs : i, head = pair / half_dim, f = pair % half_dim;
            const size_t ia = p.interleaved ? 2 * f : f, ib = p.interleaved ? 2 * f + 1 : f + half_dim;
            const size_t base = (is_k ? q_dim : 0) + head * p.head_dim;
            float x0 = x[base + ia], x1 = x[base + ib];
            if (p.rotate) {
                const float c = cos_t[pos * half_dim + f], s = sin_t[pos * half_dim + f];
                const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
                x0 = r0;
                x1 = r1;
                x[base + ia] = x0;
                x[base + ib] = x1;
            }
            if (is_k && !rope_only) {
                const size_t at = (head * p.max_len + pos) * p.head_dim;
                k_cache[at + ia] = float_to_half(x0);
                k_cache[at + ib] = float_to_half(x1);
            }
        } else if (!rope_only) {
            const size_t e2 = i - q_pairs - k_pairs, head = e2 / p.head_dim, d = e2 % p.head_dim;
            v_cache[(head * p.max_len + pos) * p.head_dim + d] = float_to_half(x[q_dim + kv_dim + e2]);
        }
    }
}

// kv_store: one item per (token row, K or V, kv head, packed word), 64 items per workgroup.
void kv_store(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<RopeKvParams>();
    const auto& step = *a.at<const StepState>(5);
    const float* qkv = a.at<const float>(0);
    const uint32_t kf = k_format(a), vf = v_format(a);
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
        const size_t cache_row = head * p.max_len + step.pos + row;
        uint32_t* words_out = a.at<uint32_t>(is_v ? 2 : 1);
        uint16_t* scales = a.at<uint16_t>(is_v ? 4 : 3);
        words_out[cache_row * words + w] = packed;
        if (w == 0) scales[cache_row] = scale;
    }
}

KvSide side(const CpuArgs& a, bool v, uint32_t head_dim) {
    const uint32_t f = v ? v_format(a) : k_format(a);
    return {a.b[v ? 2 : 1], f == kKvF16 ? nullptr : a.at<const uint16_t>(v ? 6 : 5), f, head_dim};
}

// attention_split: workgroup (query head, chunk of AKUNU_ATTENTION_CHUNK cache rows) writes the
// partial [head_dim values | max | sum of exps].
void attention_split(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<AttentionParams>();
    const auto& step = *a.at<const StepState>(4);
    const float* q = a.at<const float>(0);
    float* partial = a.at<float>(3);
    const KvSide K = side(a, false, p.head_dim), V = side(a, true, p.head_dim);
    const size_t pos = step.pos;
    const size_t first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    float weight[AKUNU_ATTENTION_CHUNK], acc[AKUNU_ATTENTION_CHUNK], kv_row[AKUNU_ATTENTION_CHUNK];
    const HalfRowFn to_float = half_row();
    for (size_t g = begin; g < end; ++g) {
        const size_t h = g % a.groups[0], chunk = g / a.groups[0];
        const size_t kvh = h / (p.n_heads / p.n_kv_heads), cb = chunk * AKUNU_ATTENTION_CHUNK;
        if (cb > pos || cb + AKUNU_ATTENTION_CHUNK <= first) continue;
        const float* qh = q + h * p.head_dim;
        const size_t kv_base = kvh * p.max_len;
        float m = kNegInf;
        for (size_t r = 0; r < AKUNU_ATTENTION_CHUNK; ++r) {
            const size_t t = cb + r;
            if (t < first || t > pos || t >= p.max_len) {
                weight[r] = kNegInf;
                continue;
            }
            K.row(kv_base + t, kv_row, to_float);
            float d = 0.0f;
            for (uint32_t i = 0; i < p.head_dim; ++i) d += qh[i] * kv_row[i];
            d *= K.scale(kv_base + t);
            d *= p.scale;
            if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
            weight[r] = d;
            m = std::max(m, d);
        }
        float l = 0.0f;
        for (size_t r = 0; r < AKUNU_ATTENTION_CHUNK; ++r) {
            const bool valid = weight[r] > kNegInf;
            const float e = valid ? std::exp(weight[r] - m) : 0.0f;
            l += e;
            weight[r] = valid ? e * V.scale(kv_base + cb + r) : 0.0f;
        }
        const size_t rows = std::min<size_t>(AKUNU_ATTENTION_CHUNK, pos + 1 - cb);
        std::fill(acc, acc + p.head_dim, 0.0f);
        for (size_t j = 0; j < rows; ++j) {
            if (weight[j] == 0.0f) continue;
            V.row(kv_base + cb + j, kv_row, to_float);
            for (uint32_t i = 0; i < p.head_dim; ++i) acc[i] += weight[j] * kv_row[i];
        }
        float* out = partial + (h * p.n_chunks + chunk) * (p.head_dim + 2);
        std::copy(acc, acc + p.head_dim, out);
        out[p.head_dim] = m;
        out[p.head_dim + 1] = l;
    }
}

// attention_merge: one workgroup per query head combines the chunks in use.
void attention_merge(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<AttentionParams>();
    const auto& step = *a.at<const StepState>(2);
    const float* partial = a.at<const float>(0);
    float* out = a.at<float>(1);
    const size_t pos = step.pos, first = p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0;
    const size_t c_begin = first / AKUNU_ATTENTION_CHUNK, c_end = pos / AKUNU_ATTENTION_CHUNK + 1;
    const size_t stride = p.head_dim + 2;
    for (size_t h = begin; h < std::min<size_t>(end, p.n_heads); ++h) {
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
}

// flash_attention: workgroup (block of AKUNU_FLASH_ROWS query rows, query head); each row runs
// the online softmax over tiles of AKUNU_FLASH_KEYS keys, as the GLSL kernel's teams do.
void flash_attention(const CpuArgs& a, size_t begin, size_t end) {
    const auto& fp = a.p<FlashAttentionParams>();
    const AttentionParams& p = fp.a;
    const auto& step = *a.at<const StepState>(4);
    const float* q = a.at<const float>(0);
    float* out_data = a.at<float>(3);
    const KvSide K = side(a, false, p.head_dim), V = side(a, true, p.head_dim);
    const size_t n = std::min(fp.rows, step.n_tokens), hd = p.head_dim;
    auto first_key = [&](size_t pos) -> size_t { return p.window > 0 && pos + 1 > p.window ? pos + 1 - p.window : 0; };
    float o[AKUNU_FLASH_MAX_HEAD_DIM], s[AKUNU_FLASH_KEYS], kv_row[AKUNU_FLASH_MAX_HEAD_DIM];
    const HalfRowFn to_float = half_row();
    for (size_t g = begin; g < end; ++g) {
        const size_t block = (g % a.groups[0]) * AKUNU_FLASH_ROWS, h = g / a.groups[0];
        if (block >= n) continue;
        const size_t kvh = h / (p.n_heads / p.n_kv_heads), kv_base = kvh * p.max_len;
        for (size_t row = block; row < std::min(block + AKUNU_FLASH_ROWS, n); ++row) {
            const float* qv = q + row * fp.q_stride + h * hd;
            const size_t pos = step.pos + row, my_first = first_key(pos);
            std::fill(o, o + hd, 0.0f);
            float m = kNegInf, l = 0.0f;
            for (size_t t0 = my_first; t0 <= pos; t0 += AKUNU_FLASH_KEYS) {
                const size_t tile = std::min<size_t>(AKUNU_FLASH_KEYS, pos + 1 - t0);
                float tile_max = kNegInf;
                for (size_t j = 0; j < tile; ++j) {
                    const size_t r = kv_base + t0 + j;
                    K.row(r, kv_row, to_float);
                    float d = 0.0f;
                    for (size_t i = 0; i < hd; ++i) d += qv[i] * kv_row[i];
                    d *= p.scale * K.scale(r);
                    if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
                    s[j] = d;
                    tile_max = std::max(tile_max, d);
                }
                const float m_new = std::max(m, tile_max);
                const float correction = std::exp(m - m_new);
                l *= correction;
                for (size_t i = 0; i < hd; ++i) o[i] *= correction;
                for (size_t j = 0; j < tile; ++j) {
                    const size_t r = kv_base + t0 + j;
                    const float w = std::exp(s[j] - m_new);
                    l += w;
                    const float wv = w * V.scale(r);
                    V.row(r, kv_row, to_float);
                    for (size_t i = 0; i < hd; ++i) o[i] += wv * kv_row[i];
                }
                m = m_new;
            }
            float* out = out_data + row * fp.out_stride + h * hd;
            for (size_t i = 0; i < hd; ++i) out[i] = o[i] / l;
        }
    }
}

}  // namespace

void register_attention(void (*add_row)(const KernelRow&)) {
    struct Fmt { const char* suffix; uint32_t k, v; };
    const Fmt formats[] = {{"", kKvF16, kKvF16},     {"_q8", kKvQ8, kKvQ8},        {"_int4", kKvInt4, kKvInt4},
                           {"_fp4", kKvFp4, kKvFp4}, {"_q8_int4", kKvQ8, kKvInt4}, {"_q8_fp4", kKvQ8, kKvFp4}};
    for (const Fmt& f : formats) {
        const uint32_t variant = f.k | (f.v << 8);
        add_row({("attention_split" + std::string(f.suffix)).c_str(), {attention_split, variant, 1}});
        add_row({("flash_attention" + std::string(f.suffix)).c_str(), {flash_attention, variant, 1}});
        if (f.k != kKvF16) add_row({("kv_store" + std::string(f.suffix)).c_str(), {kv_store, variant, 16}});
    }
    add_row({"rope_kv", {rope_kv, 0, 16}});
    add_row({"rope_only", {rope_kv, kRopeOnly, 16}});
    add_row({"attention_merge", {attention_merge, 0, 1}});
}

}  // namespace akunu::cpu
