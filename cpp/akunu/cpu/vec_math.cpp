// VecMath (vec_math.h): each body compiled for both tiers (vec_tiers.h).
#include "akunu/cpu/vec_math.h"
#include "akunu/cpu/vec_tiers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "akunu/core/half.h"

namespace akunu::cpu {

namespace {

// exp(x) without a library call, so loops over it vectorize: x = n ln2 + r with |r| <= ln2 / 2,
// exp(r) by its Taylor series to r^6 (relative error under 2e-7), 2^n through the exponent
// bits. Inputs below -87 (exp under the smallest normal float), -inf included, give 0.
AKUNU_INLINE float exp_approx(float x) {
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
    const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float t = xc * 1.44269504f + shifter, n = t - shifter;
    const float r = (xc - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 in two parts
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t ti, bits;  // unsigned: a NaN x makes garbage bits here, which must not overflow (UB)
    std::memcpy(&ti, &t, 4);
    bits = ((ti - 0x4B400000u) << 23) + 0x3F800000u;  // (n + 127) << 23: t's low bits hold n
    float scale;
    std::memcpy(&scale, &bits, 4);
    return x < -87.0f ? 0.0f : p * scale;
}

AKUNU_INLINE void silu_mul_body(const float* gate, const float* up, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + exp_approx(-gate[i])) * up[i];
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
AKUNU_INLINE void gelu_tanh_mul_body(const float* gate, const float* up, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const float x = gate[i], u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + exp_approx(-2.0f * u)) * up[i];
    }
}

// gelu(x) = 0.5 x (1 + erf(x / sqrt 2)), erf by Abramowitz and Stegun 7.1.26 (absolute error
// under 1.5e-7): erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z)
// for z >= 0, odd in z.
AKUNU_INLINE void gelu_body(const float* x, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const float z = std::fabs(x[i]) * 0.7071067811865476f, t = 1.0f / (1.0f + 0.3275911f * z);
        float p = 1.061405429f;
        p = p * t - 1.453152027f;
        p = p * t + 1.421413741f;
        p = p * t - 0.284496736f;
        p = p * t + 0.254829592f;
        const float e = 1.0f - p * t * exp_approx(-z * z);
        out[i] = 0.5f * x[i] * (1.0f + (x[i] < 0.0f ? -e : e));
    }
}

AKUNU_INLINE void scores_body(const float* q, const float* kt, size_t kt_stride, size_t d, size_t n, float* s) {
    for (size_t j = 0; j < n; ++j) s[j] = 0.0f;
    // Four rows of kt per pass over s (a quarter of s's loads and stores), each score's products
    // still added in the order of i.
    size_t i = 0;
    for (; i + 4 <= d; i += 4) {
        const float q0 = q[i], q1 = q[i + 1], q2 = q[i + 2], q3 = q[i + 3];
        const float* k0 = kt + i * kt_stride;
        const float *k1 = k0 + kt_stride, *k2 = k1 + kt_stride, *k3 = k2 + kt_stride;
        for (size_t j = 0; j < n; ++j) s[j] = s[j] + q0 * k0[j] + q1 * k1[j] + q2 * k2[j] + q3 * k3[j];
    }
    for (; i < d; ++i) {
        const float qi = q[i];
        const float* k = kt + i * kt_stride;
        for (size_t j = 0; j < n; ++j) s[j] += qi * k[j];
    }
}

// Eight floats as one value: the compiler keeps these in vector registers (an array of
// partial sums it left in memory).
typedef float V8 __attribute__((vector_size(32)));
AKUNU_INLINE V8 load8(const float* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
AKUNU_INLINE float sum8(V8 v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

// Rows of d floats `stride` apart are read one after another; the rows kPrefetchRows ahead of
// row j are asked for while it is read (a row is a head's slice of a wider K or V row, which
// the hardware's stride detection follows poorly). Prefetches do not change any result.
constexpr size_t kPrefetchRows = 16;
AKUNU_INLINE void prefetch_rows(const float* x, size_t stride, size_t j, size_t rows, size_t n, size_t d) {
    for (size_t r = j + kPrefetchRows; r < std::min(n, j + kPrefetchRows + rows); ++r)
        for (size_t i = 0; i < d; i += 16) __builtin_prefetch(x + r * stride + i);
}

// Four keys at a time: four independent chains of multiply-adds.
AKUNU_INLINE void dots_body(const float* q, const float* k, size_t k_stride, size_t d, size_t n, float* s) {
    size_t j = 0;
    for (; j + 4 <= n && d % 8 == 0; j += 4) {
        prefetch_rows(k, k_stride, j, 4, n, d);
        const float *k0 = k + j * k_stride, *k1 = k0 + k_stride, *k2 = k1 + k_stride, *k3 = k2 + k_stride;
        V8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (size_t i = 0; i < d; i += 8) {
            const V8 qv = load8(q + i);
            a0 += qv * load8(k0 + i), a1 += qv * load8(k1 + i), a2 += qv * load8(k2 + i), a3 += qv * load8(k3 + i);
        }
        s[j] = sum8(a0), s[j + 1] = sum8(a1), s[j + 2] = sum8(a2), s[j + 3] = sum8(a3);
    }
    for (; j < n; ++j) {
        const float* kj = k + j * k_stride;
        float sum = 0.0f;
        for (size_t i = 0; i < d; ++i) sum += q[i] * kj[i];
        s[j] = sum;
    }
}

// The sum in 16 lanes (one running sum would wait on each addition), added pairwise at the end.
AKUNU_INLINE float exp_shifted_body(float* s, size_t n, float m) {
    float lane[16] = {};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (size_t l = 0; l < 16; ++l) lane[l] += s[j + l] = exp_approx(s[j + l] - m);
    for (; j < n; ++j) lane[0] += s[j] = exp_approx(s[j] - m);
    for (size_t width = 8; width > 0; width /= 2)
        for (size_t l = 0; l < width; ++l) lane[l] += lane[l + width];
    return lane[0];
}

// The largest of x[0:n] (NaNs passed over; -inf when there is none) and sum_j exp(x[j] - it):
// a logits row's log-softmax normalizer, in 8 lanes each.
AKUNU_INLINE float max_sum_exp_body(const float* x, size_t n, float* sum) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float lane[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t l = 0; l < 8; ++l) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    for (; i < n; ++i) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    float m = lane[0];
    for (size_t l = 1; l < 8; ++l) m = lane[l] > m ? lane[l] : m;
    float acc[8] = {};
    for (i = 0; i + 8 <= n; i += 8)
        for (size_t l = 0; l < 8; ++l) acc[l] += exp_approx(x[i + l] - m);
    for (; i < n; ++i) acc[0] += exp_approx(x[i] - m);
    *sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return m;
}

AKUNU_INLINE float scale_max_body(float* x, size_t n, float scale) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    V8 a0 = V8{} + kNegInf, a1 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const V8 v0 = load8(x + i) * scale, v1 = load8(x + i + 8) * scale;
        std::memcpy(x + i, &v0, sizeof v0), std::memcpy(x + i + 8, &v1, sizeof v1);
        a0 = v0 > a0 ? v0 : a0, a1 = v1 > a1 ? v1 : a1;
    }
    float m = kNegInf;
    for (; i < n; ++i) m = (x[i] *= scale) > m ? x[i] : m;
    for (size_t l = 0; l < 8; ++l) m = std::max({m, a0[l], a1[l]});
    return m;
}

AKUNU_INLINE double sum_exp_body(const float* x, size_t n, float m) {
    double acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t l = 0; l < 8; ++l) acc[l] += double(exp_approx(x[i + l] - m));
    for (; i < n; ++i) acc[0] += double(exp_approx(x[i] - m));
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

AKUNU_INLINE void mix_body(float* o, float keep, const float* w, const float* v, size_t v_stride, size_t n, size_t d) {
    for (size_t i = 0; i < d; ++i) o[i] *= keep;
    // Four rows of v per pass over o (a quarter of o's loads and stores), each element's
    // products still added in the order of j.
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        prefetch_rows(v, v_stride, j, 4, n, d);
        const float w0 = w[j], w1 = w[j + 1], w2 = w[j + 2], w3 = w[j + 3];
        const float* v0 = v + j * v_stride;
        const float *v1 = v0 + v_stride, *v2 = v1 + v_stride, *v3 = v2 + v_stride;
        for (size_t i = 0; i < d; ++i) o[i] = o[i] + w0 * v0[i] + w1 * v1[i] + w2 * v2[i] + w3 * v3[i];
    }
    for (; j < n; ++j) {
        const float wj = w[j];
        const float* vj = v + j * v_stride;
        for (size_t i = 0; i < d; ++i) o[i] += wj * vj[i];
    }
}

AKUNU_INLINE void rope_body(float* x, const float* cos, const float* sin, size_t half, bool interleaved) {
    if (interleaved) {
        for (size_t f = 0; f < half; ++f) {
            const float a = x[2 * f], b = x[2 * f + 1];
            x[2 * f] = a * cos[f] - b * sin[f];
            x[2 * f + 1] = a * sin[f] + b * cos[f];
        }
    } else {
        for (size_t f = 0; f < half; ++f) {
            const float a = x[f], b = x[f + half];
            x[f] = a * cos[f] - b * sin[f];
            x[f + half] = a * sin[f] + b * cos[f];
        }
    }
}

// Scale max|x| / 32767 per block, round half to even; stored in order, or in tile_dot.h's
// kX16Order within groups of 4 (interleave). A block holding a NaN or an infinity gets a NaN
// scale and zero codes: the dot products it enters come out NaN, as the float kernels' do,
// and no non-finite value is converted to an integer (undefined in C++).
AKUNU_INLINE void quantize16_body(const float* x, size_t k, int16_t* q16, float* d, int32_t* sum, bool interleave) {
    for (size_t b = 0; b < k / 32; ++b, x += 32, q16 += 32) {
        // The largest |x| through its bits: for non-negative floats the bits order as the values
        // do, and an integer maximum vectorizes (a float one would not, for NaN's sake); bits at
        // or past infinity's are a NaN or an infinity.
        uint32_t top = 0;
        for (size_t j = 0; j < 32; ++j) {
            uint32_t u;
            std::memcpy(&u, x + j, 4);
            top = std::max(top, u & 0x7FFFFFFFu);
        }
        float amax;
        std::memcpy(&amax, &top, 4);
        if (top >= 0x7F800000u) {
            d[b] = std::numeric_limits<float>::quiet_NaN(), sum[b] = 0;
            std::fill_n(q16, 32, int16_t(0));
            continue;
        }
        d[b] = amax / 32767.0f;
        const float inv = amax != 0.0f ? 1.0f / d[b] : 0.0f;
        int32_t q[32], s = 0;
        for (size_t j = 0; j < 32; ++j) q[j] = int32_t(std::nearbyint(x[j] * inv));
        for (size_t j = 0; j < 32; ++j) s += q[j];
        for (size_t j = 0; j < 32; j += 4) {
            q16[j] = int16_t(q[j]), q16[j + 1] = int16_t(q[j + (interleave ? 2 : 1)]);
            q16[j + 2] = int16_t(q[j + (interleave ? 1 : 2)]), q16[j + 3] = int16_t(q[j + 3]);
        }
        sum[b] = s;
    }
}

AKUNU_VEC_TIERS(silu_mul, void, (const float* g, const float* u, float* o, size_t n), (g, u, o, n))
AKUNU_VEC_TIERS(gelu_tanh_mul, void, (const float* g, const float* u, float* o, size_t n), (g, u, o, n))
AKUNU_VEC_TIERS(gelu, void, (const float* x, float* o, size_t n), (x, o, n))
AKUNU_VEC_TIERS(scores, void, (const float* q, const float* kt, size_t ks, size_t d, size_t n, float* s),
                (q, kt, ks, d, n, s))
AKUNU_VEC_TIERS(dots, void, (const float* q, const float* k, size_t ks, size_t d, size_t n, float* s),
                (q, k, ks, d, n, s))
AKUNU_VEC_TIERS(exp_shifted, float, (float* s, size_t n, float m), (s, n, m))
AKUNU_VEC_TIERS(max_sum_exp, float, (const float* x, size_t n, float* sum), (x, n, sum))
AKUNU_VEC_TIERS(sum_exp, double, (const float* x, size_t n, float m), (x, n, m))
AKUNU_VEC_TIERS(scale_max, float, (float* x, size_t n, float scale), (x, n, scale))
AKUNU_VEC_TIERS(mix, void, (float* o, float keep, const float* w, const float* v, size_t vs, size_t n, size_t d),
                (o, keep, w, v, vs, n, d))

AKUNU_VEC_TIERS(quantize16, void, (const float* x, size_t k, int16_t* q, float* d, int32_t* s, bool il),
                (x, k, q, d, s, il))
AKUNU_VEC_TIERS(rope, void, (float* x, const float* c, const float* s, size_t half, bool il), (x, c, s, half, il))

// The f16 conversion has no loop form the compiler turns into F16C: each tier has its own.
void to_half_base(const float* x, uint16_t* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = float_to_half(x[i]);
}

AKUNU_V3 void to_half_v3(const float* x, uint16_t* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) out[i] = float_to_half(x[i]);
}

const VecMath kBase{silu_mul_base,    gelu_tanh_mul_base, gelu_base,     scores_base, dots_base,
                    exp_shifted_base, max_sum_exp_base,   sum_exp_base,  mix_base,    rope_base,
                    quantize16_base,  to_half_base,       scale_max_base};
const VecMath kV3{silu_mul_v3, gelu_tanh_mul_v3, gelu_v3, scores_v3,     dots_v3,    exp_shifted_v3, max_sum_exp_v3,
                  sum_exp_v3,  mix_v3,           rope_v3, quantize16_v3, to_half_v3, scale_max_v3};

}  // namespace

const VecMath& vec_math_for(CpuIsa isa) { return isa >= CpuIsa::kAvx2 ? kV3 : kBase; }

const VecMath& vec_math() { return vec_math_for(cpu_isa()); }

}  // namespace akunu::cpu
