// Buffers for the kernel tests: f32 or f16 uploads (with what the device holds as float),
// downloads, NaN-poisoned outputs, and a tolerance check that names the first bad elements.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "akunu/core/half.h"
#include "akunu/vulkan/buffer.h"
#include "vk_test.h"

namespace akunu::test {

// Uploads `v` as f32 or f16, and returns what the device holds as float (f16-rounded).
inline Buffer upload(const std::shared_ptr<Device>& dev, const std::vector<float>& v, DType dtype,
                     std::vector<float>* rounded) {
    *rounded = v;
    if (dtype == DType::kF32) return dev->allocate(v.data(), v.size() * 4);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        h[i] = float_to_half(v[i]);
        (*rounded)[i] = half_to_float(h[i]);
    }
    return dev->allocate(h.data(), h.size() * 2);
}

inline std::vector<float> download(const Buffer& b, size_t n, DType dtype) {
    std::vector<float> out(n);
    if (dtype == DType::kF32) {
        b.read(out.data(), n * 4);
    } else {
        std::vector<uint16_t> h(n);
        b.read(h.data(), n * 2);
        for (size_t i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
    }
    return out;
}

inline Buffer poisoned(const std::shared_ptr<Device>& dev, size_t n, DType dtype) {
    std::vector<float> nan(n, kPoison), unused;
    return upload(dev, nan, dtype, &unused);
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol, float atol,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
            if (++bad <= 3) ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
        }
    }
    EXPECT_EQ(bad, 0u) << what;
}

// One query row's attention in double precision: softmax(scale * q . k_t, softcapped) over
// cache rows first..pos of KV head kvh (caches [n_kv, max_len, head_dim]), weighting V, into out.
inline void reference_attention(const float* qh, const std::vector<float>& k, const std::vector<float>& v, size_t kvh,
                                size_t max_len, size_t head_dim, size_t first, size_t pos, float scale, float softcap,
                                float* out) {
    std::vector<double> score(pos + 1);
    double m = -1e300, l = 0.0;
    for (size_t t = first; t <= pos; ++t) {
        double d = 0.0;
        for (size_t i = 0; i < head_dim; ++i) d += double(qh[i]) * k[(kvh * max_len + t) * head_dim + i];
        d *= scale;
        if (softcap > 0.0f) d = softcap * std::tanh(d / softcap);
        score[t] = d;
        m = std::max(m, d);
    }
    for (size_t t = first; t <= pos; ++t) l += std::exp(score[t] - m);
    for (size_t i = 0; i < head_dim; ++i) {
        double acc = 0.0;
        for (size_t t = first; t <= pos; ++t) acc += std::exp(score[t] - m) * v[(kvh * max_len + t) * head_dim + i];
        out[i] = float(acc / l);
    }
}

}  // namespace akunu::test
