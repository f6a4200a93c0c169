// The CPU sampler: sample.comp's algorithm run by one thread per row, so that a seed gives the
// same tokens on both backends (up to the rounding of exp/log near exact ties).
//
// Greedy is the argmax (lowest index on ties); otherwise temperature, top-k, top-p and min-p
// filters (thresholds found by the same 4-bit radix passes over order-preserving float keys),
// then argmax(z + Gumbel noise) with the noise from Philox4x32-10 keyed by the seed and counted
// by (token index, position).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "akunu/cpu/vec_math.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

namespace {

uint32_t key(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

uint32_t philox_x(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1) {
    uint32_t c2 = 0, c3 = 0;
    for (int r = 0; r < 10; ++r) {
        const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
        const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
        const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}

struct Row {
    const float* logits;
    uint32_t n;
    float temperature;
    float z(uint32_t i) const { return logits[i] / temperature; }

    // sample.comp select_threshold: the largest key t with measure(t) >= target.
    uint32_t select_threshold(bool mass, float target, float zmax, uint32_t floor_key) const {
        uint32_t prefix = 0;
        for (int shift = 28; shift >= 0; shift -= 4) {
            float acc[16] = {};
            for (uint32_t i = 0; i < n; ++i) {
                const float v = z(i);
                const uint32_t kv = key(v);
                if (kv < floor_key || kv < prefix) continue;
                const float w = mass ? std::exp(v - zmax) : 1.0f;
                const uint32_t top = ((kv >> shift) >> 4) == ((prefix >> shift) >> 4) ? (kv >> shift) & 15u : 15u;
                for (uint32_t j = 0; j <= top; ++j) acc[j] += w;
            }
            uint32_t best = 0;
            for (uint32_t j = 1; j < 16; ++j)
                if (acc[j] >= target) best = j;
            prefix |= best << shift;
        }
        return prefix;
    }
};

constexpr uint32_t kBatch = 1;  // sample_batch: a sampler per sequence, BatchRows after the step

void sample(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<SampleParams>();
    const auto& step = *a.at<const StepState>(3);
    const auto* batch_rows = reinterpret_cast<const BatchRow*>(&step + 1);
    const bool batch = a.variant == kBatch;
    for (size_t row = begin; row < end; ++row) {
        if (batch && row >= step.n_tokens) break;
        const auto& cfg = a.at<const SamplerState>(4)[batch ? batch_rows[row].seq : 0];
        const Row r{a.at<const float>(0) + row * p.n, p.n, cfg.temperature};
        // The argmax (its first index) and the log-softmax normalizer, through vectorized passes.
        float sum = 0.0f;
        const float lmax = vec_math().max_sum_exp(r.logits, p.n, &sum);
        uint32_t best_i = 0xFFFFFFFFu;  // no finite or +inf logit: the last token, as sample.comp
        if (lmax > -std::numeric_limits<float>::infinity())
            best_i = uint32_t(std::find(r.logits, r.logits + p.n, lmax) - r.logits);
        const float log_z = lmax + std::log(sum);

        uint32_t chosen = best_i;
        if (cfg.temperature > 0.0f) {
            const float zmax = lmax / cfg.temperature;
            uint32_t floor_key = 0;
            if (cfg.top_k > 0 && cfg.top_k < p.n) floor_key = r.select_threshold(false, float(cfg.top_k), zmax, 0);
            if (cfg.top_p < 1.0f) {
                float kept = 0.0f;
                for (uint32_t i = 0; i < p.n; ++i) {
                    const float v = r.z(i);
                    if (key(v) >= floor_key) kept += std::exp(v - zmax);
                }
                floor_key = r.select_threshold(true, cfg.top_p * kept, zmax, floor_key);
            }
            if (cfg.min_p > 0.0f) floor_key = std::max(floor_key, key(zmax + std::log(cfg.min_p)));
            const uint32_t position = batch ? batch_rows[row].pos + 1 : step.pos + step.n_tokens + uint32_t(row);
            float score = -std::numeric_limits<float>::infinity();
            uint32_t index = 0xFFFFFFFFu;
            for (uint32_t i = 0; i < p.n; ++i) {
                const float v = r.z(i);
                if (key(v) < floor_key) continue;
                const uint32_t bits = philox_x(i, position, cfg.seed_lo, cfg.seed_hi);
                const float u = (float(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
                const float s = v - std::log(-std::log(u));
                if (s > score) score = s, index = i;
            }
            chosen = index;
        }
        chosen = std::min(chosen, p.n - 1);
        a.at<uint32_t>(1)[p.out_slot + row] = chosen;
        a.at<float>(2)[p.out_slot + row] = r.logits[chosen] - log_z;
        const uint32_t target = batch ? a.at<const uint32_t>(7)[row] : AKUNU_NO_TARGET;
        if (target < p.n) {  // a scored row (sample.comp)
            a.at<float>(5)[row] = r.logits[target] - log_z;
            a.at<uint32_t>(6)[row] = best_i == target ? 1u : 0u;
        }
    }
}

}  // namespace

void register_sample(void (*add_row)(const KernelRow&)) {
    add_row({"sample", {sample, 0, 1}});
    add_row({"sample_batch", {sample, kBatch, 1}});
}

}  // namespace akunu::cpu
