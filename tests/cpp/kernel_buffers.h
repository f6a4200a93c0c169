// Buffers for the kernel tests: f32 or f16 uploads (with what the device holds as float),
// downloads, NaN-poisoned outputs, and a tolerance check that names the first bad elements.
#pragma once

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

}  // namespace akunu::test
