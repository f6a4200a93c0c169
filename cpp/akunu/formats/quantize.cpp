#include "akunu/formats/quantize.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "akunu/core/half.h"

namespace akunu::quantize {

void q8_0_codes(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
    for (size_t b = 0; b < k / 32; ++b, x += 32, q += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        d[b] = amax / 127.0f;
        const float inv = amax != 0.0f ? 1.0f / d[b] : 0.0f;
        int32_t s = 0;
        for (int j = 0; j < 32; ++j) {
            q[j] = int8_t(std::nearbyint(x[j] * inv));  // the default rounding: half to even
            s += q[j];
        }
        sum[b] = s;
    }
}

void q8_0_blocks(const float* x, size_t k, uint8_t* blocks) {
    constexpr size_t kBlock = 32, kBytes = 2 + kBlock;
    std::vector<int8_t> q(k);
    std::vector<float> d(k / kBlock);
    std::vector<int32_t> sums(k / kBlock);
    q8_0_codes(x, k, q.data(), d.data(), sums.data());
    for (size_t b = 0; b < k / kBlock; ++b) {
        const uint16_t h = float_to_half(d[b]);
        std::memcpy(blocks + b * kBytes, &h, 2);
        std::memcpy(blocks + b * kBytes + 2, q.data() + b * kBlock, kBlock);
    }
}

}  // namespace akunu::quantize
