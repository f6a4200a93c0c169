// flash_rows.h's loops (flash attention's scores and value mixes, several query rows at once)
// in both tiers and both forms (in cache, streamed) against float64 loops over the same inputs.
// Odd sizes: 1 to 4 rows, key counts that leave each remainder of the three-key block (1, 2, 5,
// 64) and one past the streamed forms' prefetch distance (41), row lengths of 8, 24 and 264
// (not multiples of the 16-element mix block) and the AVX-512 streamed forms' 16, 48 and 64,
// strides past the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/flash_rows.h"

namespace akunu::test {
namespace {

std::vector<float> normal_values(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

// f(isa, streamed, rows, n, d) over every case: every tier the CPU has, both forms, 1 to
// kFlashRowsAtOnce rows, 1, 2, 5, 41 and 64 keys (AVX-512's blocks of 16 keys: every tail),
// rows of 8, 16, 24, 48, 64 and 264 elements (AVX-512's streamed forms take 16 to 64 in steps
// of 16).
// `got` against start + sum_i term(i) for i < count in float64, within 1e-6 of the sum of the
// magnitudes (float32 products and sums in another order).
template <class Term>
void expect_sum(float got, double start, size_t count, Term term, const std::string& where) {
    double want = start, size = std::fabs(start);
    for (size_t i = 0; i < count; ++i) {
        want += term(i);
        size += std::fabs(term(i));
    }
    EXPECT_NEAR(got, want, 1e-6 * size) << where;
}

std::string where(cpu::CpuIsa isa, bool streamed, size_t rows, size_t n, size_t d, size_t r, size_t at) {
    return "isa " + std::to_string(int(isa)) + " streamed " + std::to_string(streamed) + " rows " +
           std::to_string(rows) + " n " + std::to_string(n) + " d " + std::to_string(d) + " at " + std::to_string(r) +
           ", " + std::to_string(at);
}

template <class F>
void each_case(F&& f) {
    for (cpu::CpuIsa isa : {cpu::CpuIsa::kScalar, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
        if (isa > cpu::cpu_isa()) continue;
        for (bool streamed : {false, true})
            for (size_t rows = 1; rows <= cpu::kFlashRowsAtOnce; ++rows)
                for (size_t n : {1, 2, 5, 41, 64})
                    for (size_t d : {8, 16, 24, 48, 64, 264}) f(isa, streamed, rows, n, d);
    }
}

TEST(FlashRows, DotsMatchAFloat64Reference) {
    std::mt19937 rng{11};
    each_case([&](cpu::CpuIsa isa, bool streamed, size_t rows, size_t n, size_t d) {
        const size_t qs = d + 5, ks = d + 3, ss = n + 2;
        const auto q = normal_values(rows * qs, rng), k = normal_values(n * ks, rng);
        std::vector<float> s(rows * ss, -1.0f);
        const cpu::FlashRows& fr = cpu::flash_rows_for(isa);
        (streamed ? fr.dots_streamed : fr.dots)(q.data(), qs, rows, k.data(), ks, d, n, s.data(), ss);
        for (size_t r = 0; r < rows; ++r)
            for (size_t j = 0; j < n; ++j)
                expect_sum(
                    s[r * ss + j], 0.0, d, [&](size_t i) { return double(q[r * qs + i]) * k[j * ks + i]; },
                    where(isa, streamed, rows, n, d, r, j));
    });
}

TEST(FlashRows, MixMatchesAFloat64Reference) {
    std::mt19937 rng{12};
    each_case([&](cpu::CpuIsa isa, bool streamed, size_t rows, size_t n, size_t d) {
        const size_t os = d + 7, ws = n + 1, vs = d + 3;
        const auto o0 = normal_values(rows * os, rng), w = normal_values(rows * ws, rng);
        const auto v = normal_values(n * vs, rng), keep = normal_values(rows, rng);
        std::vector<float> o = o0;
        const cpu::FlashRows& fr = cpu::flash_rows_for(isa);
        (streamed ? fr.mix_streamed : fr.mix)(o.data(), os, keep.data(), w.data(), ws, rows, v.data(), vs, n, d);
        for (size_t r = 0; r < rows; ++r) {
            for (size_t i = 0; i < d; ++i)
                expect_sum(
                    o[r * os + i], double(o0[r * os + i]) * keep[r], n,
                    [&](size_t j) { return double(w[r * ws + j]) * v[j * vs + i]; },
                    where(isa, streamed, rows, n, d, r, i));
            for (size_t i = d; i < os; ++i) EXPECT_EQ(o[r * os + i], o0[r * os + i]) << "past the row";
        }
    });
}

}  // namespace
}  // namespace akunu::test
