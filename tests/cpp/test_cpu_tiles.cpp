// Tile-major weights on the CPU backend: the GEMV and GEMM on tiles against the row-major
// reference through the launchers, the tile products for each form of x (int8 exact, int16
// within its rounding bound, several rows at once equal to one row's), every instruction-set
// tier bit for bit against the scalar one, and the GEMM's weight panels.
#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/cpu_profile.h"
#include "akunu/cpu/cpu_replay.h"
#include "akunu/cpu/kv_rows.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/thread_pool.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/cpu/tile_unpack.h"
#include "akunu/formats/tiles.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/cpu/weight_rows.h"
#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/vulkan/shader_library.h"
#include "vk_test.h"
#include "params.h"
#include "cpu_random_rows.h"

namespace akunu::test {

// A [rows, k] matrix of `w`'s type, its rows dequantized, and its tiles.
struct TiledMatrix {
    std::vector<uint8_t> rows_bytes, tiles;
    std::vector<float> deq;  // [rows][k]
};

static TiledMatrix random_matrix(const cpu::WeightType& w, const cpu::TileLayout& l, size_t rows, size_t k,
                                 std::mt19937& rng) {
    TiledMatrix m;
    m.deq.resize(rows * k);
    for (size_t r = 0; r < rows; ++r) {
        const auto row = random_row(w, k, rng);
        m.rows_bytes.insert(m.rows_bytes.end(), row.begin(), row.end());
        cpu::dequant_range(w, row.data(), 0, k, m.deq.data() + r * k);
    }
    m.tiles.resize(cpu::tiled_bytes(l, rows, k), 0xAB);
    cpu::pack_tiles(l, m.rows_bytes.data(), rows, k, m.tiles.data());
    return m;
}

// x as the integer-dot kernels see it: 8 bits per block of 32, dequantized again.
static std::vector<float> quantized_x(const std::vector<float>& x) {
    std::vector<int8_t> q(x.size());
    std::vector<float> d(x.size() / 32), out(x.size());
    std::vector<int32_t> sum(x.size() / 32);
    cpu::quantize_x_scalar()(x.data(), x.size(), q.data(), d.data(), sum.data());
    for (size_t i = 0; i < x.size(); ++i) {
        out[i] = float(q[i]) * d[i / 32];
        EXPECT_LE(std::fabs(out[i] - x[i]), 0.5f * d[i / 32] * 1.0001f) << i;  // round to nearest
    }
    return out;
}

// One weight type's case: a tile-major matrix of 77 rows (two row blocks) and k past one
// 256-element panel (kGemmChunk) for every block size, and 70 rows of x (two column blocks of
// the GEMM, the second partial).
struct TileCase {
    const cpu::WeightType& w;
    const cpu::TileLayout& l;
    size_t rows, k, m;
    TiledMatrix mat;
    std::vector<float> x;  // [m][k]
    std::string name;
    bool has_i8;

    // sum over i of W[r, i] x[i] in double, and the sum of the terms' magnitudes in *mag.
    double reference(size_t r, const float* xr, double* mag) const {
        double want = 0;
        *mag = 0;
        for (size_t i = 0; i < k; ++i)
            want += double(mat.deq[r * k + i]) * xr[i], *mag += std::fabs(double(mat.deq[r * k + i]) * xr[i]);
        return want;
    }
};

static TileCase tile_case(const cpu::WeightType& w, std::mt19937& rng) {
    const cpu::TileLayout* l = cpu::tile_layout_for(w.type);
    EXPECT_TRUE(l) << type_traits(w.type).name;
    const size_t rows = 77, k = w.block_size == 256 ? 512 : w.block_size == 32 ? 288 : 301, m = 70;
    TileCase c{w,
               *l,
               rows,
               k,
               m,
               random_matrix(w, *l, rows, k, rng),
               std::vector<float>(m * k),
               type_traits(l->tiled).name,
               cpu::tile_gemv(l->tiled, cpu::XForm::kInt8) != nullptr};
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& v : c.x) v = u(rng);
    return c;
}

// GEMV on x's first row (decode) and GEMM on all rows (prefill), through the launchers.
static void check_launchers(const std::shared_ptr<Device>& d, const TileCase& c) {
    const size_t rows = c.rows, k = c.k, m = c.m;
    Buffer wb = d->allocate(c.mat.tiles.data(), c.mat.tiles.size()), xb = d->allocate(c.x.data(), c.x.size() * 4);
    std::vector<float> poison(m * rows, NAN);
    Buffer yv = d->allocate(poison.data(), rows * 4), ym = d->allocate(poison.data(), poison.size() * 4);
    const StepState step{0, 0, uint32_t(m), 0};
    Buffer sb = d->allocate(&step, sizeof step);
    CommandList cl(d);
    cl.begin();
    kernels::gemv(cl, wb, c.l.tiled, xb, yv, rows, k, false, nullptr);
    kernels::gemm(cl, wb, c.l.tiled, xb, ym, {m, rows, k, k, rows}, sb, false);
    cl.end();
    cl.submit_and_wait();
    std::vector<float> yvec(rows), ymat(m * rows);
    yv.read(yvec.data(), rows * 4);
    ym.read(ymat.data(), ymat.size() * 4);
    double mag;
    for (size_t r = 0; r < rows; ++r) {
        const double want = c.reference(r, c.x.data(), &mag);
        ASSERT_NEAR(yvec[r], want, 1e-5 * mag + 1e-6) << c.name << " gemv row " << r;
        for (size_t t = 0; t < m; ++t) {
            const double want_t = c.reference(r, c.x.data() + t * k, &mag);
            ASSERT_NEAR(ymat[t * rows + r], want_t, 1e-5 * mag + 1e-6) << c.name << " gemm " << t << "," << r;
        }
    }
}

// The tile products for x as the GEMVs take it: int8 (exact against x as quantized), int16
// (within the rounding bound), and the AVX2 products against the scalar ones; then the GEMM's
// weight panels and x's int8 quantizer, AVX2 against scalar.
static void check_tile_products(const TileCase& c) {
    const size_t rows = c.rows, k = c.k;
    const cpu::TileLayout& l = c.l;
    const std::vector<float> x0(c.x.begin(), c.x.begin() + long(k));
    std::vector<int8_t> q(k), q_avx(k);
    std::vector<float> dx(k / 32), dx_avx(k / 32), fsum(k / 32);
    std::vector<int32_t> sum(k / 32), sum_avx(k / 32);
    cpu::quantize_x_scalar()(x0.data(), k, q.data(), dx.data(), sum.data());
    cpu::block_sums(x0.data(), k, 32, fsum.data());
    cpu::TileX tx;
    tx.f = x0.data(), tx.q = q.data(), tx.d = dx.data(), tx.sum = sum.data(), tx.fsum = fsum.data();
    const std::vector<float> xq = c.has_i8 ? quantized_x(x0) : x0;
    // x in 16 bits (the default GEMV of the block types and k-quants), from both vec_math
    // tiers, in the order and with the block sums the type's product reads.
    const bool interleave = cpu::tile_sum_block(l.tiled) == 32;
    std::vector<int16_t> q16(k), q16_v3(k);
    std::vector<float> d16(k / 32), d16_v3(k / 32), fsum16(k / 16);
    std::vector<int32_t> sum16(k / 32), sum16_v3(k / 32);
    cpu::block_sums(x0.data(), k, cpu::tile_sum_block(l.tiled), fsum16.data());
    cpu::vec_math_for(cpu::CpuIsa::kScalar).quantize16(x0.data(), k, q16.data(), d16.data(), sum16.data(), interleave);
    if (cpu::use_avx2()) {
        cpu::vec_math_for(cpu::CpuIsa::kAvx2)
            .quantize16(x0.data(), k, q16_v3.data(), d16_v3.data(), sum16_v3.data(), interleave);
        ASSERT_EQ(q16, q16_v3) << c.name;
        ASSERT_EQ(d16, d16_v3) << c.name;
        ASSERT_EQ(sum16, sum16_v3) << c.name;
    }
    cpu::TileX tx16 = tx;
    tx16.q16 = q16.data(), tx16.d = d16.data(), tx16.sum = sum16.data(), tx16.fsum = fsum16.data();
    auto x_of = [&](cpu::XForm form) -> const cpu::TileX& { return form == cpu::XForm::kInt16 ? tx16 : tx; };
    float a[32], b[32];
    double mag;
    for (size_t t = 0; t < (rows + 31) / 32; ++t) {
        const uint8_t* tile = c.mat.tiles.data() + t * cpu::tile_bytes(l, k);
        if (c.has_i8) {
            cpu::tile_gemv(l.tiled, cpu::XForm::kInt8)(tile, tx, k, a);
            for (size_t r = 0; r < 32 && t * 32 + r < rows; ++r) {
                const double want = c.reference(t * 32 + r, xq.data(), &mag);
                ASSERT_NEAR(a[r], want, 1e-5 * mag + 1e-6) << c.name << " int8 row " << r;
            }
        }
        // 16 bits: within the rounding bound of the exact product, sum |w| * max|x_b| / 65534.
        if (auto dot16 = cpu::tile_gemv(l.tiled, cpu::XForm::kInt16)) {
            dot16(tile, tx16, k, a);
            for (size_t r = 0; r < 32 && t * 32 + r < rows; ++r) {
                double bound = 0;
                for (size_t i = 0; i < k; ++i) bound += std::fabs(c.mat.deq[(t * 32 + r) * k + i]) * d16[i / 32] / 2;
                const double want = c.reference(t * 32 + r, x0.data(), &mag);
                ASSERT_NEAR(a[r], want, bound + 1e-5 * mag + 1e-6) << c.name << " int16 row " << r;
                ASSERT_GT(bound, 0.0);
            }
        }
        // Several rows of x at once (the short integer GEMM): each row equal to its one-row product.
        if (auto rows16 = cpu::tile_int_rows(l.tiled)) {
            constexpr int kRows = 5;  // a pass of 4 rows and one of 1
            std::vector<float> xr(kRows * k), fr(kRows * k / 16), dr(kRows * k / 32);
            std::vector<int16_t> qr(kRows * k);
            std::vector<int32_t> sr(kRows * k / 32);
            cpu::TileX xs[kRows];
            for (int i = 0; i < kRows; ++i) {  // x rotated by 7 i elements: a different row each
                float* xi = xr.data() + i * k;
                std::rotate_copy(x0.begin(), x0.begin() + long(7 * i), x0.end(), xi);
                cpu::quantize_x16(xi, k, qr.data() + i * k, dr.data() + i * k / 32, sr.data() + i * k / 32, interleave);
                cpu::block_sums(xi, k, cpu::tile_sum_block(l.tiled), fr.data() + i * k / 16);
                xs[i] = tx16;
                xs[i].f = xi, xs[i].q16 = qr.data() + i * k, xs[i].d = dr.data() + i * k / 32;
                xs[i].sum = sr.data() + i * k / 32, xs[i].fsum = fr.data() + i * k / 16;
            }
            float many[kRows * 32];
            rows16(tile, xs, kRows, k, many);
            for (int i = 0; i < kRows; ++i) {
                cpu::tile_gemv(l.tiled, cpu::XForm::kInt16)(tile, xs[i], k, b);
                for (int r = 0; r < 32; ++r)
                    ASSERT_EQ(many[i * 32 + r], b[r]) << c.name << " rows, x " << i << " row " << r;
            }
        }
        // The AVX2 and AVX-512 products against the scalar ones: bit for bit for the quantized types.
        for (const cpu::XForm form : {cpu::XForm::kFloat, cpu::XForm::kInt16, cpu::XForm::kInt8}) {
            const cpu::TileGemvFn tiers[] = {cpu::use_avx2() ? cpu::tile_gemv_avx2(l.tiled, form) : nullptr,
                                             cpu::use_avx512_vnni() ? cpu::tile_gemv_avx512(l.tiled, form) : nullptr};
            for (const cpu::TileGemvFn tier : tiers) {
                if (!tier) continue;
                tier(tile, x_of(form), k, a);
                cpu::tile_gemv_scalar(l.tiled, form)(tile, x_of(form), k, b);
                for (int r = 0; r < 32; ++r) {
                    if (l.header_fields > 0 || form == cpu::XForm::kInt16)
                        ASSERT_EQ(a[r], b[r]) << c.name << " form=" << int(form) << " row " << r;
                    else
                        ASSERT_NEAR(a[r], b[r], 1e-4f * (1 + std::fabs(b[r]))) << c.name;
                }
            }
        }
    }
    if (c.has_i8 && cpu::use_avx2()) {
        cpu::quantize_x_avx2()(x0.data(), k, q_avx.data(), dx_avx.data(), sum_avx.data());
        ASSERT_EQ(q, q_avx) << c.name;
        ASSERT_EQ(dx, dx_avx) << c.name;
        ASSERT_EQ(sum, sum_avx) << c.name;
    }
}

// The GEMM's weight panels: the AVX2 unpacking against the scalar one (equal but for q4_1's and
// q5_1's d q + m, which AVX2 rounds once, in an FMA).
static void check_panels(const TileCase& c) {
    auto unpack = cpu::use_avx2() ? cpu::tile_unpack_avx2(c.l.tiled) : nullptr;
    if (!unpack) return;
    const size_t blocks = std::min<size_t>(c.k / c.w.block_size, cpu::kGemmChunk / c.w.block_size);
    static float pa[cpu::kGemmChunk][cpu::kGemmTile], pb[cpu::kGemmChunk][cpu::kGemmTile];
    const bool minimum = c.l.tiled == TensorType::Q4_1_T32 || c.l.tiled == TensorType::Q5_1_T32;
    for (size_t c0 : {size_t(0), size_t(32)}) {
        unpack(c.l.tiled, c.mat.tiles.data(), 1, blocks - 1, pa, c0);
        cpu::tile_unpack_scalar()(c.l.tiled, c.mat.tiles.data(), 1, blocks - 1, pb, c0);
        for (size_t kk = 0; kk < (blocks - 1) * c.w.block_size; ++kk)
            for (size_t r = c0; r < c0 + 32; ++r)
                ASSERT_NEAR(pa[kk][r], pb[kk][r], minimum ? 1e-6f * (1 + std::fabs(pb[kk][r])) : 0.0f)
                    << c.name << " unpack " << kk << "," << r;
    }
}

TEST(CpuBackend, TileGemvAndGemmMatchTheRowMajorReference) {
    // Both prefill GEMMs: x rounded to 16 bits with integer products where the processor has
    // them (gemm_vnni.h), and fp32 products on dequantized panels (int_gemm=0).
    const std::shared_ptr<Device> devices[] = {Device::create("cpu"), Device::create("cpu", "int_gemm=0")};
    std::mt19937 rng(11);
    for (const cpu::WeightType& w : cpu::weight_types()) {
        const TileCase c = tile_case(w, rng);
        for (const auto& d : devices) check_launchers(d, c);
        check_tile_products(c);
        check_panels(c);
        if (HasFatalFailure()) return;
    }
}

}  // namespace akunu::test
