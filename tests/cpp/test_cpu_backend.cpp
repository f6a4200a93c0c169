// The CPU backend's pieces: the device and its host buffers (whose addresses are their host
// pointers), the thread pool, the AVX2 row dots against the scalar ones for every type, a GEMV
// recorded and replayed through a CommandList (tile-major weights: test_cpu_tiles.cpp),
// the KV-cache kernels in blocks against the pre-allocated cache, and the error for a kernel
// without a CPU implementation. (tests/python/test_cpu_backend.py
// covers selection and the engine; the shared Python suites run every model test on the CPU.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
#include "cpu_random_rows.h"
#include "vk_test.h"
#include "params.h"

namespace akunu::test {

static std::shared_ptr<Device> cpu_device() {
    static std::shared_ptr<Device> d = Device::create("cpu");
    return d;
}

TEST(CpuBackend, DeviceAndHostBuffers) {
    auto d = cpu_device();
    EXPECT_TRUE(d->is_cpu());
    EXPECT_EQ(d->profile().type, DeviceType::kCpu);
    const uint64_t before = d->allocations_total();
    {
        Buffer b = d->allocate(1000);
        ASSERT_NE(b.contents(), nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.contents()) % 64, 0u);
        const auto* bytes = static_cast<const uint8_t*>(b.contents());
        for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0);  // zeroed
        const float v[3] = {1, 2, 3};
        b.write(v, sizeof(v), 8);
        float back[3];
        b.read(back, sizeof(back), 8);
        EXPECT_EQ(back[2], 3.0f);
        EXPECT_THROW(b.write(v, sizeof(v), 996), Error);
    }
    EXPECT_EQ(d->allocations_total(), before + 1);
    EXPECT_EQ(d->live_buffers(), 0);
}

static void mark(void* ctx, size_t begin, size_t end) {
    auto* hits = static_cast<std::vector<std::atomic<int>>*>(ctx);
    for (size_t i = begin; i < end; ++i) (*hits)[i].fetch_add(1);
}

TEST(CpuBackend, ThreadPoolRunsEveryIndexOnce) {
    cpu::ThreadPool pool(3);
    for (size_t total : {1u, 2u, 7u, 257u, 10007u}) {
        for (int rep = 0; rep < 200; ++rep) {
            std::vector<std::atomic<int>> hits(total);
            pool.run(total, mark, &hits, rep % 3 + 1);
            for (size_t i = 0; i < total; ++i) ASSERT_EQ(hits[i].load(), 1) << total << " " << i;
        }
    }
}

// A job of few chunks, then one of many, back to back on more workers than cores: a worker
// the OS pauses between seeing a job start and entering it must not claim a chunk of the next
// job from the closed one's counter (which ran that chunk twice, ThreadPool::run).
TEST(CpuBackend, ThreadPoolRunsEachChunkOnceAcrossJobs) {
    cpu::ThreadPool pool(8);
    std::vector<std::atomic<int>> small(2), large(4096);
    for (int rep = 0; rep < 20000; ++rep) {
        for (auto& h : small) h.store(0);
        for (auto& h : large) h.store(0);
        pool.run(small.size(), mark, &small);
        pool.run(large.size(), mark, &large);
        for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(small[i].load(), 1) << rep << " " << i;
        for (size_t i = 0; i < large.size(); ++i) ASSERT_EQ(large[i].load(), 1) << rep << " " << i;
    }
}

// Replay with inline_us: every group of every command still runs once; commands that took
// under the threshold run on the calling thread alone after their first run (which is shared,
// as a command whose time is unknown), and inline_us 0 shares them again.
static std::atomic<int> off_caller{0};
static std::thread::id caller_id;
static void mark_groups(const cpu::CpuArgs& a, size_t begin, size_t end) {
    if (std::this_thread::get_id() != caller_id) off_caller.fetch_add(1);
    auto* hits = reinterpret_cast<std::vector<std::atomic<int>>*>(a.b[0]);
    for (size_t i = begin; i < end; ++i) (*hits)[i].fetch_add(1);
}

TEST(CpuBackend, ReplayRunsShortCommandsOnTheCallingThread) {
    cpu::ThreadPool pool(3);
    caller_id = std::this_thread::get_id();
    std::vector<std::atomic<int>> hits(4096);
    std::vector<cpu::CpuCommand> commands(3);
    for (auto& c : commands) {
        c.fn = mark_groups;
        c.args.b[0] = reinterpret_cast<uint8_t*>(&hits);
        c.groups = hits.size();
    }
    for (const double inline_us : {1e9, 0.0}) {
        off_caller = 0;
        for (int rep = 0; rep < 50; ++rep) {
            for (auto& h : hits) h.store(0);
            cpu::replay(pool, commands, inline_us);
            for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 3) << inline_us << " " << i;
            if (rep == 0) off_caller = 0;  // the first run is shared
        }
        if (inline_us > 0) EXPECT_EQ(off_caller.load(), 0) << "a command under the threshold left the caller";
        for (const auto& c : commands) EXPECT_GT(c.work_us, 0.0f);
    }
}

// A command's first run is shared even with every command under the threshold: its two groups
// wait (up to 10 s) for each other, which one thread running them in turn never sees.
static std::atomic<int> started{0};
static std::atomic<int> met{0};
static void wait_for_the_other(const cpu::CpuArgs&, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
        started.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        if (started.load() >= 2) met.fetch_add(1);
    }
}

TEST(CpuBackend, ReplaySharesACommandsFirstRun) {
    started = 0, met = 0;  // a repeated run (--gtest_repeat) starts from nothing
    cpu::ThreadPool pool(2);
    std::vector<cpu::CpuCommand> commands(1);
    commands[0].fn = wait_for_the_other;
    commands[0].groups = 2;
    cpu::replay(pool, commands, 1e9);
    EXPECT_EQ(met.load(), 2) << "the first run's groups ran one after the other on one thread";
}

// The row dots (scalar and AVX2) against the dequantized row in double, and the weight table's
// dequantizers (AVX2 where they have one) against the exact ones of formats/dequant.cpp.
TEST(CpuBackend, RowDotsAgreeWithTheDequantizedReference) {
    std::mt19937 rng(7);
    for (const cpu::WeightType& w : cpu::weight_types()) {
        for (size_t k : {256u, 768u, 2304u}) {
            const auto row = random_row(w, k, rng);
            std::vector<float> x(k), deq(k);
            std::uniform_real_distribution<float> u(-1, 1);
            for (auto& v : x) v = u(rng);
            cpu::dequant_range(w, row.data(), 0, k, deq.data());
            std::vector<float> exact(k);  // the table's fast dequantizer equals formats/dequant.cpp's
            type_traits(w.type).dequant(row.data(), exact.data(), k / w.block_size);
            EXPECT_EQ(deq, exact) << type_traits(w.type).name << " k=" << k;
            double want = 0, mag = 0;
            for (size_t i = 0; i < k; ++i) want += double(deq[i]) * x[i], mag += std::fabs(double(deq[i]) * x[i]);
            const float scalar = cpu::row_dot_scalar(w.type)(row.data(), x.data(), k);
            EXPECT_NEAR(scalar, want, 1e-5 * mag + 1e-6) << type_traits(w.type).name << " k=" << k;
            if (cpu::use_avx2())
                if (auto avx = cpu::row_dot_avx2(w.type))
                    EXPECT_NEAR(avx(row.data(), x.data(), k), want, 1e-5 * mag + 1e-6)
                        << type_traits(w.type).name << " avx2";
        }
    }
}

TEST(CpuBackend, GemvReplaysFromACommandList) {
    auto d = cpu_device();
    const size_t rows = 37, k = 96;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w(rows * k), x(k), y(rows, NAN);
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    Buffer wb = d->allocate(w.data(), w.size() * 4), xb = d->allocate(x.data(), x.size() * 4),
           yb = d->allocate(y.data(), y.size() * 4);
    CommandList cl(d);
    cl.begin();
    kernels::gemv(cl, wb, TensorType::F32, xb, yb, rows, k, false, nullptr);
    cl.end();
    for (int rep = 0; rep < 2; ++rep) {  // a recorded list replays
        cl.submit_and_wait();
        yb.read(y.data(), rows * 4);
        for (size_t r = 0; r < rows; ++r) {
            double want = 0;
            for (size_t i = 0; i < k; ++i) want += double(w[r * k + i]) * x[i];
            ASSERT_NEAR(y[r], want, 1e-4) << r;
        }
    }
    EXPECT_EQ(cl.dispatch_count(), 1u);
    EXPECT_TRUE(std::isnan(cl.elapsed_ms(0, 1)));
}

// A GEMM's items numbered rows first, cut into the shares a pool hands out (any cut): every
// (row block, column block) is in exactly one run of exactly one share, rows clipped to m_end,
// each run's columns its own column block's.
TEST(CpuBackend, GemmRunsRowsFirstCoverEachItemOnce) {
    const size_t col_blocks = 5, row_blocks = 7, n = 4 * cpu::kGemmTile + 9, m_end = 5 * cpu::kGemmTile + 3;
    const size_t total = col_blocks * row_blocks;
    for (size_t shares = 1; shares <= total; ++shares) {
        std::vector<int> seen(total, 0);
        for (size_t s = 0; s < shares; ++s)
            cpu::for_each_gemm_run_rows_first(
                total * s / shares, total * (s + 1) / shares, col_blocks, n, m_end,
                [&](size_t n0, size_t nt, size_t m0, size_t m1) {
                    ASSERT_EQ(n0 % cpu::kGemmTile, 0u);
                    ASSERT_EQ(nt, std::min(cpu::kGemmTile, n - n0));
                    ASSERT_TRUE(m0 % cpu::kGemmTile == 0 && m0 < m1 && m1 <= m_end);
                    for (size_t r = m0 / cpu::kGemmTile; r * cpu::kGemmTile < m1; ++r) {
                        const size_t g = r * col_blocks + n0 / cpu::kGemmTile;
                        ASSERT_TRUE(g >= total * s / shares && g < total * (s + 1) / shares) << shares;
                        ++seen[g];
                    }
                });
        for (size_t g = 0; g < total; ++g) ASSERT_EQ(seen[g], g / col_blocks * cpu::kGemmTile < m_end ? 1 : 0) << g;
    }
}

// A softmax row's loops in both vec_math tiers: scale_max scales in place and returns the
// largest score, passing over a NaN; exp_shifted's lane sums match a float64 sum, and a score
// of -inf weighs exactly 0. Lengths around the 16 lanes, and a whole audio window.
TEST(CpuBackend, SoftmaxRowLoopsOfBothTiers) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<cpu::CpuIsa> tiers{cpu::CpuIsa::kScalar};
    if (cpu::use_avx2()) tiers.push_back(cpu::CpuIsa::kAvx2);
    for (const cpu::CpuIsa isa : tiers)
        for (const size_t n : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(40), size_t(1500)}) {
            const cpu::VecMath& vm = cpu::vec_math_for(isa);
            std::vector<float> x(n), scaled(n);
            for (float& v : x) v = normal(rng);
            if (n > 3) x[n / 2] = -std::numeric_limits<float>::infinity(), x[1] = std::nanf("");
            float want = -std::numeric_limits<float>::infinity();
            for (size_t j = 0; j < n; ++j)
                if ((scaled[j] = x[j] * 0.125f) > want) want = scaled[j];
            const float got = vm.scale_max(x.data(), n, 0.125f);
            ASSERT_EQ(got, want) << n;
            for (size_t j = 0; j < n; ++j)
                ASSERT_TRUE(x[j] == scaled[j] || (std::isnan(x[j]) && std::isnan(scaled[j])));
            if (n > 3) x[1] = 0.0f;  // exp_shifted's rows hold no NaN
            double sum = 0.0;
            for (const float v : x) sum += std::exp(double(v) - double(got));
            const float total = vm.exp_shifted(x.data(), n, got);
            ASSERT_NEAR(total, sum, 1e-5 * sum + 1e-30) << n;
            if (n > 3) ASSERT_EQ(x[n / 2], 0.0f);
        }
}

// The GEMM's register blocks (AVX2 6x16, AVX-512 6x64) against the scalar loop, for every tier
// this processor runs: odd row counts (tails of 1..5 rows), zero columns past n, accumulation
// onto what acc holds.
TEST(CpuBackend, GemmTileTiersAgreeWithTheScalarLoop) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    const size_t k = 37, n = 50, ldx = 41;
    alignas(64) static float wt[k][cpu::kGemmTile];
    for (size_t kk = 0; kk < k; ++kk)
        for (size_t j = 0; j < cpu::kGemmTile; ++j) wt[kk][j] = j < n ? u(rng) : 0.0f;
    for (size_t m : {1u, 5u, 6u, 13u, 64u}) {
        std::vector<float> x(m * ldx), start(m * cpu::kGemmTile);
        for (auto& v : x) v = u(rng);
        for (auto& v : start) v = u(rng);
        std::vector<float> want = start;
        cpu::gemm_tile_for(cpu::CpuIsa::kScalar)(&wt[0][0], n, x.data(), ldx, m, k, want.data());
        for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
            if (cpu::cpu_isa() < isa) continue;
            std::vector<float> got = start;
            cpu::gemm_tile_for(isa)(&wt[0][0], n, x.data(), ldx, m, k, got.data());
            for (size_t i = 0; i < m; ++i)
                for (size_t j = 0; j < n; ++j)
                    ASSERT_NEAR(got[i * cpu::kGemmTile + j], want[i * cpu::kGemmTile + j], 1e-5f)
                        << cpu::cpu_isa_name(isa) << " m=" << m << " " << i << "," << j;
        }
    }
}

// The short GEMM on float tiles (tile_rows: a column converted once for up to 8 rows) against
// a float64 reference on the same rounded weights, for every tier this processor runs: rows
// 1..9 (a whole AVX-512 block and one more, the AVX2 blocks of 3 and their tails), k odd (no
// whole pairs of columns), x rows apart by more than k.
TEST(CpuBackend, TileRowsTiersMatchAFloat64Reference) {
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> u(-1, 1);
    const size_t k = 37, ldx = 41;
    for (TensorType t : {TensorType::F32_T32, TensorType::F16_T32, TensorType::BF16_T32}) {
        const size_t e = t == TensorType::F32_T32 ? 4 : 2;
        std::vector<uint8_t> tile(k * cpu::kTileRows * e);
        std::vector<double> w(k * cpu::kTileRows);  // w[kk * 32 + r], as the tile holds it
        for (size_t i = 0; i < w.size(); ++i) {
            const float v = u(rng);
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            const uint16_t h = t == TensorType::F16_T32 ? float_to_half(v) : uint16_t(bits >> 16);
            if (e == 4)
                std::memcpy(&tile[i * 4], &v, 4);
            else
                std::memcpy(&tile[i * 2], &h, 2);
            w[i] = e == 4 ? v : t == TensorType::F16_T32 ? half_to_float(h) : bf16_to_float(h);
        }
        for (size_t m = 1; m <= 9; ++m) {
            std::vector<float> x(m * ldx);
            for (auto& v : x) v = u(rng);
            for (cpu::CpuIsa isa : {cpu::CpuIsa::kScalar, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
                if (cpu::cpu_isa() < isa) continue;
                std::vector<float> got(m * cpu::kTileRows, NAN);
                cpu::tile_rows_for(t, isa)(tile.data(), x.data(), ldx, m, k, got.data());
                for (size_t i = 0; i < m; ++i)
                    for (size_t r = 0; r < cpu::kTileRows; ++r) {
                        double want = 0;
                        for (size_t kk = 0; kk < k; ++kk) want += w[kk * cpu::kTileRows + r] * x[i * ldx + kk];
                        ASSERT_NEAR(got[i * cpu::kTileRows + r], want, 2e-5)
                            << cpu::cpu_isa_name(isa) << " m=" << m << " row " << i << "," << r;
                    }
            }
        }
    }
    EXPECT_EQ(cpu::tile_rows(TensorType::Q8_0_T32), nullptr);
}

// A buffer's device address on the CPU is its host pointer: the block tables hold pointers.
TEST(CpuBackend, AddressableBuffersAreTheirHostPointers) {
    auto d = cpu_device();
    EXPECT_TRUE(d->profile().buffer_device_address);
    Buffer b = Buffer::allocate(d, 4096, Residency::kAuto, true);
    EXPECT_EQ(b.address(), uint64_t(reinterpret_cast<uintptr_t>(b.contents())));
    Buffer plain = d->allocate(64);
    EXPECT_THROW(plain.address(), Error);
}

// Every ring and block variant of kernels.cmake has a CPU kernel, registered with its layout.
TEST(CpuBackend, EveryCacheLayoutVariantHasACpuKernel) {
    int n = 0;
    for (const std::string& name : kernel_names()) {
        const bool ring = name.size() > 5 && name.compare(name.size() - 5, 5, "_ring") == 0;
        const bool blocks = name.size() > 7 && name.compare(name.size() - 7, 7, "_blocks") == 0;
        // The Q/K/V GEMVs' _blocks variants (a folded rope_kv) run on Vulkan devices only: the CPU
        // backend folds no rope_kv (gemv_folds_rope_kv).
        if ((!ring && !blocks) || name.rfind("gemv", 0) == 0) continue;
        const cpu::CpuKernel k = cpu::find_kernel(name);
        EXPECT_EQ(cpu::cache_layout(k.variant), ring ? cpu::CacheLayout::kRing : cpu::CacheLayout::kBlocks) << name;
        ++n;
    }
    EXPECT_EQ(n, 2 + 2 * 5 + 2 * 2 * 6);  // rope_kv, kv_store (5 formats), both attentions (6 formats)
}

// The cache writers (rope_kv, kv_store) and readers (attention_split, flash_attention) on a
// cache in blocks against the pre-allocated cache: 20 tokens from position 246 cross the first
// block boundary; the rows, the decode attention at 265 and the prefill attention agree bit for
// bit, and the rows read back through the cache's own layout code (read_side).
TEST(CpuBackend, CacheKernelsInBlocksMatchThePreallocatedCache) {
    auto d = cpu_device();
    const ModelConfig c = attention_config(4, 2, 16);
    const uint32_t max_len = 600, rows = 20, pos = 246, q_dim = 4 * 16, row = q_dim + 2 * 2 * 16;
    const std::vector<float> qkv = random_floats(rows * row, 11), q = random_floats(q_dim, 12);
    const std::vector<float> cos = random_floats(max_len * 8, 13), sin = random_floats(max_len * 8, 14);
    const StepState prefill{pos, 0, rows, 0}, decode{pos + rows - 1, 0, 1, 0};
    Buffer cos_b = d->allocate(cos.data(), cos.size() * 4), sin_b = d->allocate(sin.data(), sin.size() * 4);
    for (const KvDType dtype : {KvDType::kF16, KvDType::kQ8Int4, KvDType::kInt4H}) {
        KVCache full(d, c, int(max_len), dtype), blocks(d, c, int(max_len), dtype, true);
        blocks.reserve(int(pos + rows));
        ASSERT_EQ(blocks.blocks_allocated(), 2);
        std::vector<float> results[2];
        for (int b = 0; b < 2; ++b) {
            const KVCache& kv = b ? blocks : full;
            Buffer qkv_b = d->allocate(qkv.data(), qkv.size() * 4), q_b = d->allocate(q.data(), q.size() * 4);
            Buffer step_p = d->allocate(&prefill, sizeof(prefill)), step_d = d->allocate(&decode, sizeof(decode));
            Buffer partial = d->allocate(kernels::attention_partial_floats(4, 16, max_len) * 4);
            Buffer out = d->allocate((rows + 1) * q_dim * 4);
            const kernels::AttentionShape heads{4, 2, 16, max_len, 0, 0.25f, 0.0f};
            CommandList cl(d);
            cl.begin();
            kernels::rope_kv(cl, &qkv_b, &cos_b, &sin_b, kv.bindings(0), &step_p,
                             {4, 2, 16, max_len, true, true, rows});
            kernels::flash_attention(cl, &qkv_b, kv.bindings(0), Binding(&out, q_dim * 4), &step_p,
                                     {heads, rows, row, q_dim});
            kernels::attention(cl, &q_b, kv.bindings(0), &partial, Binding(&out, 0, q_dim * 4), &step_d, heads);
            cl.end();
            cl.submit_and_wait();
            results[b].resize((rows + 1) * q_dim);
            out.read(results[b].data(), results[b].size() * 4);
        }
        EXPECT_EQ(results[0], results[1]) << kv_dtype_name(dtype);
        for (const float x : results[1]) ASSERT_TRUE(std::isfinite(x));
        for (const bool values : {false, true})
            for (const bool scales : {false, true}) {
                if (scales && dtype == KvDType::kF16) continue;
                const auto got = blocks.read_side(0, values, scales, int(pos + rows));
                EXPECT_EQ(got, full.read_side(0, values, scales, int(pos + rows))) << values << scales;
                // The written rows are not zero: the comparison is not between two empty caches.
                EXPECT_NE(got, std::vector<uint8_t>(got.size(), 0));
            }
    }
}

TEST(CpuBackend, KernelsWithoutACpuVersionSaySo) {
    try {
        cpu_device()->pipeline("gemm_cm_f16");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("GPU-only"), std::string::npos) << e.what();
    }
}

}  // namespace akunu::test
