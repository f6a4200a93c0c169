// A batched step's rows outside the query tiles in attention_split's layout
// (kernels::attention_rows with RowPartials, attention_split.comp built with KV_BATCH): decode
// rows of sequences at 1, 2, 63, 65, 257, 300 and 513 positions (one, two and three chunks of
// the cache, chunk boundaries one row either side) and an untiled run of a prompt's rows across
// the block at 256 that sees the step's earlier rows, in one step of a table of more rows than
// the step holds. An f16 pool against a double-precision causal softmax (query-head groups,
// head sizes 64, 128 and 256, a sliding window, a softcap), the same dispatch twice (the arrival
// counters it leaves zero); every quantized format against attention_rows.comp on the same codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "akunu/core/half.h"
#include "akunu/engine/batch_pipeline.h"
#include "akunu/engine/kernel_launch.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_pool.h"
#include "akunu/vulkan/command_list.h"
#include "kernel_buffers.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {

namespace {

using BatchRowAttentionTest = VkTest;

struct StepRun {
    uint32_t seq, pos, rows;  // rows at positions pos .. pos + rows - 1 of sequence seq
};
constexpr int kContext = 700;
// Decode rows at the lengths above, and 6 rows of a prompt from position 252, mixed in.
constexpr StepRun kRuns[] = {{0, 0, 1},  {1, 1, 1},   {2, 62, 1},  {7, 252, 6},
                             {3, 64, 1}, {4, 256, 1}, {5, 299, 1}, {6, 512, 1}};
constexpr uint32_t kSequences = 8;
constexpr uint32_t kTableRows = 19;  // more than the step's 13 rows

uint32_t length_of(uint32_t seq) {
    for (const StepRun& r : kRuns)
        if (r.seq == seq) return r.pos + r.rows;
    return 0;
}

// The step buffer: StepState, then kTableRows BatchRows (none tiled: no query tiles here).
Buffer step_buffer(const std::shared_ptr<Device>& dev, uint32_t* n_rows) {
    std::vector<BatchRow> rows;
    for (const StepRun& r : kRuns)
        for (uint32_t i = 0; i < r.rows; ++i) rows.push_back({r.seq, r.pos + i, r.pos, r.pos + r.rows, 0});
    *n_rows = uint32_t(rows.size());
    EXPECT_EQ(cut_batch_tiles(rows.data(), int(*n_rows), 0, nullptr, 0), *n_rows);  // every row's untiled_row
    const StepState st{0, 0, *n_rows, 0};
    rows.resize(kTableRows, BatchRow{});
    std::vector<uint8_t> bytes(sizeof st + rows.size() * sizeof(BatchRow));
    std::memcpy(bytes.data(), &st, sizeof st);
    std::memcpy(bytes.data() + sizeof st, rows.data(), rows.size() * sizeof(BatchRow));
    return dev->allocate(bytes.data(), bytes.size());
}

// The partials and zeroed counters a table of kTableRows rows needs.
struct Partials {
    Buffer partial, counters;
    kernels::RowPartials bindings() const { return {Binding(partial), Binding(counters)}; }
};
Partials partials_for(const std::shared_ptr<Device>& dev, uint32_t n_heads, uint32_t head_dim) {
    const size_t floats = kernels::batch_row_partial_floats(kTableRows, n_heads, head_dim, kContext);
    const std::vector<uint32_t> zeros(size_t(kTableRows) * n_heads, 0u);
    return {dev->allocate(floats * 4), dev->allocate(zeros.data(), zeros.size() * 4)};
}

// Runs the step's attention (split where `parts`, else attention_rows.comp) into a poisoned out.
std::vector<float> attend(const std::shared_ptr<Device>& dev, const KvBindings& cache, const Buffer& q,
                          const Buffer& step, const kernels::AttentionShape& shape, const Partials* parts,
                          size_t floats) {
    const size_t q_dim = size_t(shape.n_heads) * shape.head_dim;
    Buffer out = poisoned(dev, kTableRows * q_dim, DType::kF32);
    const kernels::RowPartials pb = parts ? parts->bindings() : kernels::RowPartials{};
    CommandList cl(dev);
    cl.begin();
    kernels::attention_rows(cl, &q, cache, &out, &step,
                            {shape, kTableRows, uint32_t(q_dim), uint32_t(q_dim), DType::kF32}, nullptr,
                            parts ? &pb : nullptr);
    cl.end();
    cl.submit_and_wait();
    return download(out, floats, DType::kF32);
}

}  // namespace

TEST_F(BatchRowAttentionTest, SplitRowsOfAnF16PoolMatchSoftmax) {
    struct Case {
        uint32_t n_heads, n_kv, head_dim, window;
        float softcap;
    };
    const auto dev = device();
    for (const Case c : {Case{4, 2, 64, 0, 0.0f}, Case{2, 2, 128, 0, 0.0f}, Case{8, 2, 64, 40, 0.0f},
                         Case{4, 1, 128, 300, 5.0f}, Case{2, 1, 256, 0, 0.0f}}) {
        const std::string what = "heads=" + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) +
                                 " head_dim=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window);
        ASSERT_TRUE(kernels::batch_row_split(dev->profile(), kTableRows, c.n_heads, c.head_dim, kContext)) << what;
        KvPool pool(dev, attention_config(int(c.n_heads), int(c.n_kv), int(c.head_dim)), kContext, KvDType::kF16,
                    int(kSequences), 3 * int(kSequences));
        // Each sequence's K and V as the pool holds them (f16-rounded), [n_kv, kContext, head_dim].
        std::vector<std::vector<float>> k(kSequences), v(kSequences);
        for (uint32_t seq = 0; seq < kSequences; ++seq) {
            const int length = int(length_of(seq));
            pool.prepare_write(int(seq), 0, length);
            for (const bool values : {false, true}) {
                std::vector<float>& dst = values ? v[seq] : k[seq];
                dst.assign(size_t(c.n_kv) * kContext * c.head_dim, 0.0f);
                const std::vector<float> x = random_floats(size_t(c.n_kv) * length * c.head_dim, 60 + 2 * seq + values,
                                                           values ? -1.0f : -2.0f, values ? 1.0f : 2.0f);
                std::vector<uint16_t> h(x.size());
                for (size_t i = 0; i < x.size(); ++i) {
                    h[i] = float_to_half(x[i]);
                    const size_t head = i / (size_t(length) * c.head_dim), rest = i % (size_t(length) * c.head_dim);
                    dst[head * kContext * c.head_dim + rest] = half_to_float(h[i]);
                }
                pool.write_side(int(seq), 0, values, 0, length, h.data());
            }
            pool.set_length(int(seq), length);
        }
        uint32_t n = 0;
        const Buffer step = step_buffer(dev, &n);
        const size_t q_dim = size_t(c.n_heads) * c.head_dim;
        std::vector<float> q;
        const Buffer qb = upload(dev, random_floats(kTableRows * q_dim, 61, -2.0f, 2.0f), DType::kF32, &q);
        const float scale = 1.0f / std::sqrt(float(c.head_dim));
        const kernels::AttentionShape shape{c.n_heads, c.n_kv, c.head_dim, kContext, c.window, scale, c.softcap};
        std::vector<float> want(n * q_dim);
        size_t row = 0;
        for (const StepRun& r : kRuns)
            for (uint32_t i = 0; i < r.rows; ++i, ++row) {
                const size_t pos = r.pos + i, first = c.window > 0 && pos + 1 > c.window ? pos + 1 - c.window : 0;
                for (size_t h = 0; h < c.n_heads; ++h)
                    reference_attention(&q[row * q_dim + h * c.head_dim], k[r.seq], v[r.seq], h / (c.n_heads / c.n_kv),
                                        kContext, c.head_dim, first, pos, scale, c.softcap,
                                        &want[row * q_dim + h * c.head_dim]);
            }
        const Partials parts = partials_for(dev, c.n_heads, c.head_dim);
        for (int run = 0; run < 2; ++run)  // the second run finds the counters the first left
            expect_close(attend(dev, pool.bindings(0), qb, step, shape, &parts, want.size()), want, 1e-4f, 1e-4f,
                         what + " run " + std::to_string(run));
        expect_close(attend(dev, pool.bindings(0), qb, step, shape, nullptr, want.size()), want, 1e-4f, 1e-4f,
                     what + " attention_rows");
    }
}

// Heads of 64 read each row 8 bytes of codes a lane; heads of 40 too for q8 (a team of 8 with 3
// lanes idle), and one value at a time for the formats with 4-bit codes, whose rows are not whole
// 8-byte vectors (kernels::attention_split_shape).
TEST_F(BatchRowAttentionTest, SplitRowsReadEveryQuantizedFormatAsAttentionRowsDoes) {
    const auto dev = device();
    const uint32_t n_heads = 4, n_kv = 2;
    for (const uint32_t head_dim : {64u, 40u})
        for (const KvDType dtype :
             {KvDType::kQ8, KvDType::kInt4, KvDType::kFp4, KvDType::kQ8Int4, KvDType::kQ8Fp4, KvDType::kInt4H}) {
            const uint32_t q_dim = n_heads * head_dim, row = q_dim + 2 * n_kv * head_dim;
            SCOPED_TRACE("head_dim " + std::to_string(head_dim));
            KvPool pool(dev, attention_config(int(n_heads), int(n_kv), int(head_dim)), kContext, dtype, int(kSequences),
                        3 * int(kSequences));
            // One step writes every sequence's rows through kv_store (no RoPE), as a batch's would.
            std::vector<BatchRow> fill;
            for (uint32_t seq = 0; seq < kSequences; ++seq) {
                const uint32_t length = length_of(seq);
                pool.prepare_write(int(seq), 0, int(length));
                for (uint32_t t = 0; t < length; ++t) fill.push_back({seq, t, 0, length, 0});
            }
            const uint32_t rows = uint32_t(fill.size());
            std::vector<uint8_t> bytes(sizeof(StepState) + fill.size() * sizeof(BatchRow));
            const StepState st{0, 0, rows, 0};
            std::memcpy(bytes.data(), &st, sizeof st);
            std::memcpy(bytes.data() + sizeof st, fill.data(), fill.size() * sizeof(BatchRow));
            const Buffer fill_step = dev->allocate(bytes.data(), bytes.size());
            const std::vector<float> qkv = random_floats(size_t(rows) * row, 62, -2.0f, 2.0f);
            const Buffer qkv_b = dev->allocate(qkv.data(), qkv.size() * 4);
            const std::vector<float> table(size_t(kContext) * head_dim / 2, 0.0f);
            const Buffer cos = dev->allocate(table.data(), table.size() * 4),
                         sin = dev->allocate(table.data(), table.size() * 4);
            CommandList cl(dev);
            cl.begin();
            kernels::rope_kv(cl, &qkv_b, &cos, &sin, pool.bindings(0), &fill_step,
                             {n_heads, n_kv, head_dim, kContext, false, false, rows, row});
            cl.end();
            cl.submit_and_wait();
            for (uint32_t seq = 0; seq < kSequences; ++seq) pool.set_length(int(seq), int(length_of(seq)));

            uint32_t n = 0;
            const Buffer step = step_buffer(dev, &n);
            std::vector<float> q;
            const Buffer qb = upload(dev, random_floats(kTableRows * q_dim, 63, -2.0f, 2.0f), DType::kF32, &q);
            const Partials parts = partials_for(dev, n_heads, head_dim);
            for (const uint32_t window : {0u, 100u}) {
                const kernels::AttentionShape shape{n_heads, n_kv, head_dim, kContext, window, 0.125f, 0.0f};
                const std::vector<float> want = attend(dev, pool.bindings(0), qb, step, shape, nullptr, n * q_dim);
                expect_close(attend(dev, pool.bindings(0), qb, step, shape, &parts, n * q_dim), want, 1e-4f, 1e-5f,
                             std::string(kv_variant_suffix(dtype)) + " window=" + std::to_string(window));
            }
        }
}

// attention_split's team per row: f16 rows 8 halves a lane (several vectors a lane where the row
// outgrows a subgroup), quantized rows one 8-byte vector of codes a lane, and LANE_VECS = 0 (the
// one-value reads) where a row is not whole vectors or its team outgrows a subgroup.
TEST(AttentionSplitShapeTest, TeamsCoverARowInWholeVectors) {
    DeviceProfile d = list_devices().front().profile;
    struct Case {
        uint32_t subgroup, head_dim;
        KvDType dtype;
        uint32_t team, lane_vecs;
    };
    for (const Case& c : std::initializer_list<Case>{{32, 128, KvDType::kF16, 16, 1},
                                                     {32, 256, KvDType::kF16, 32, 1},
                                                     {8, 128, KvDType::kF16, 8, 2},
                                                     {32, 128, KvDType::kInt4, 8, 1},
                                                     {32, 256, KvDType::kFp4H, 16, 1},
                                                     {8, 256, KvDType::kInt4H, 16, 0},
                                                     {32, 128, KvDType::kQ8, 16, 1},
                                                     {8, 128, KvDType::kQ8, 16, 0},
                                                     {32, 64, KvDType::kQ8Int4, 8, 1},
                                                     {32, 40, KvDType::kInt4, 2, 0},
                                                     {32, 40, KvDType::kQ8, 8, 1}}) {
        d.subgroup_size = c.subgroup;
        const kernels::launch::AttentionSplitShape a = kernels::launch::attention_split_shape(d, c.head_dim, c.dtype);
        const std::string what = std::string(kv_variant_suffix(c.dtype)) + " head_dim " + std::to_string(c.head_dim) +
                                 " subgroup " + std::to_string(c.subgroup);
        EXPECT_EQ(a.team, c.team) << what;
        EXPECT_EQ(a.lane_vecs, c.lane_vecs) << what;
    }
}

}  // namespace akunu::test
