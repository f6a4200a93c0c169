// The loops the CPU kernels spend their time in outside the matrix products (activations and
// the attention tiles), written once as plain loops and compiled twice: for baseline x86-64
// and for x86-64-v3 (AVX2, FMA, F16C) through a target attribute, so the compiler vectorizes
// each for its tier. vec_math() picks the version use_avx2() allows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/cpu_profile.h"

namespace akunu::cpu {

struct VecMath {
    // out[i] = silu(gate[i]) * up[i], or gelu_tanh(gate[i]) * up[i].
    void (*silu_mul)(const float* gate, const float* up, float* out, size_t n);
    void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, size_t n);
    // out[i] = gelu(x[i]) with erf (absolute error under 1e-7 of x); out may be x.
    void (*gelu)(const float* x, float* out, size_t n);
    // s[j] = sum_i q[i] * kt[i * kt_stride + j] for j < n, i < d (keys stored transposed).
    void (*scores)(const float* q, const float* kt, size_t kt_stride, size_t d, size_t n, float* s);
    // s[j] = sum_i q[i] * k[j * k_stride + i] for j < n, i < d (keys as rows).
    void (*dots)(const float* q, const float* k, size_t k_stride, size_t d, size_t n, float* s);
    // s[j] = exp(s[j] - m) for j < n (exactly 0 where s[j] is -inf); returns their sum.
    float (*exp_shifted)(float* s, size_t n, float m);
    // The largest of x[0:n] (NaNs passed over; -inf if none) and, in *sum, sum_j exp(x[j] - it).
    float (*max_sum_exp)(const float* x, size_t n, float* sum);
    // sum_j exp(x[j] - m) for j < n, in double (-inf adds 0): a softmax's normalizer over a whole
    // vocabulary, whose many small terms a float sum would drop.
    double (*sum_exp)(const float* x, size_t n, float m);
    // o[i] = o[i] * keep + sum_j w[j] * v[j * v_stride + i] for i < d, j < n.
    void (*mix)(float* o, float keep, const float* w, const float* v, size_t v_stride, size_t n, size_t d);
    // RoPE on one head: pairs (x[2f], x[2f + 1]) when interleaved, else (x[f], x[f + half]),
    // rotated by (cos[f], sin[f]), f < half.
    void (*rope)(float* x, const float* cos, const float* sin, size_t half, bool interleaved);
    // x[0:k] rounded to 16 bits per block of 32 (tile_dot.h quantize_x16, which calls this).
    void (*quantize16)(const float* x, size_t k, int16_t* q16, float* d, int32_t* sum, bool interleave);
    // out[i] = the f16 nearest x[i] (ties to even), i < n.
    void (*to_half)(const float* x, uint16_t* out, size_t n);
    // x[j] *= scale for j < n; returns the largest (NaNs passed over; -inf when n is 0): a
    // softmax row's scores and their maximum in vector lanes (one running maximum would wait
    // on each comparison).
    float (*scale_max)(float* x, size_t n, float scale);
};

const VecMath& vec_math();
const VecMath& vec_math_for(CpuIsa isa);  // kScalar or kAvx2 (and kAvx512, which uses AVX2's)

}  // namespace akunu::cpu
