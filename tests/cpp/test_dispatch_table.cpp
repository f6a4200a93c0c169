// DispatchTable: the workgroup counts of a prefill chunk's dispatches follow its token count.
#include <cmath>

#include "akunu/vulkan/command_list.h"
#include "akunu/vulkan/dispatch.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {

using Axis = ChunkRows::Axis;

static std::vector<uint32_t> counts(const ChunkRows& c, uint32_t n, std::vector<uint32_t> recorded) {
    std::vector<uint32_t> out(3);
    c.groups_for(n, recorded.data(), out.data());
    return out;
}

TEST(ChunkRows, CountsCoverTheTokensRoundedUp) {
    // A GEMM of 512 rows in tiles of 128 along y: 1 tile for 1..128 tokens, 2 from 129.
    const ChunkRows gemm{Axis::kY, 512};
    EXPECT_EQ(counts(gemm, 1, {32, 4, 1}), (std::vector<uint32_t>{32, 1, 1}));
    EXPECT_EQ(counts(gemm, 128, {32, 4, 1}), (std::vector<uint32_t>{32, 1, 1}));
    EXPECT_EQ(counts(gemm, 129, {32, 4, 1}), (std::vector<uint32_t>{32, 2, 1}));
    EXPECT_EQ(counts(gemm, 512, {32, 4, 1}), (std::vector<uint32_t>{32, 4, 1}));
    EXPECT_EQ(counts(gemm, 9999, {32, 4, 1}), (std::vector<uint32_t>{32, 4, 1}));  // never past the recording
    // 100 rows in blocks of 16 along x (7 blocks, the last short): 3 tokens need 1, 17 need 2.
    const ChunkRows flash{Axis::kX, 100};
    EXPECT_EQ(counts(flash, 3, {7, 9, 1}), (std::vector<uint32_t>{1, 9, 1}));
    EXPECT_EQ(counts(flash, 17, {7, 9, 1}), (std::vector<uint32_t>{2, 9, 1}));
    EXPECT_EQ(counts(flash, 97, {7, 9, 1}), (std::vector<uint32_t>{7, 9, 1}));
    // A flat count spread over a 2-D grid 1000 wide: the width stays while more groups remain.
    const ChunkRows flat{Axis::kLinear, 64};
    EXPECT_EQ(counts(flat, 1, {1000, 7, 1}), (std::vector<uint32_t>{110, 1, 1}));  // ceil(7000 / 64)
    EXPECT_EQ(counts(flat, 10, {1000, 7, 1}), (std::vector<uint32_t>{1000, 2, 1}));
    EXPECT_EQ(counts(flat, 64, {1000, 7, 1}), (std::vector<uint32_t>{1000, 7, 1}));
    // A count that does not follow (a weight's dequantization) stays; a row window empties it.
    const ChunkRows dequant{Axis::kNone, 512, 128};
    EXPECT_EQ(counts(dequant, 127, {900, 1, 1}), (std::vector<uint32_t>{0, 0, 0}));
    EXPECT_EQ(counts(dequant, 128, {900, 1, 1}), (std::vector<uint32_t>{900, 1, 1}));
    const ChunkRows short_gemm{Axis::kY, 512, 0, 128};
    EXPECT_EQ(counts(short_gemm, 127, {32, 4, 1}), (std::vector<uint32_t>{32, 1, 1}));
    EXPECT_EQ(counts(short_gemm, 128, {32, 4, 1}), (std::vector<uint32_t>{0, 0, 0}));
}

using DispatchTableTest = VkTest;

// The CPU backend, which runs an indirect dispatch's counts as a Vulkan device does.
static std::shared_ptr<Device> cpu_device() {
    static std::shared_ptr<Device> d = Device::create("cpu");
    return d;
}

// A chunk's fill of 40 rows of 300 floats (47 groups of 256), recorded once as a table's one
// command (`untiled`: its counts follow the untiled rows, ChunkRows::untiled); run() submits it
// over a poisoned buffer and checks that exactly the first `want` floats were written.
struct ChunkFill {
    static constexpr size_t kRows = 40, kDim = 300, kGroup = 256;
    static constexpr size_t covering(size_t n) { return (47 * n + kRows - 1) / kRows * kGroup; }  // floats
    Buffer out;
    DispatchTable t;
    CommandList cl;
    ChunkFill(const std::shared_ptr<Device>& dev, bool untiled)
        : out(dev->allocate(kRows * kDim * 4)), t(*dev), cl(dev) {
        DispatchTable fills(*dev);
        fills.set_chunk_rows(uint32_t(kRows));
        kernels::fill(fills, out, DType::kF32, kRows * kDim, 1.0f);
        EXPECT_EQ(fills.commands().size(), 1u);
        EXPECT_TRUE(fills.commands()[0].chunk.follows());
        DispatchCmd cmd = fills.commands()[0];
        cmd.chunk.untiled = untiled;
        t.dispatch(cmd);
        cl.begin();
        t.record(cl);
        cl.end();
    }
    void run(size_t want_from, size_t want_to) {
        const std::vector<float> poison(kRows * kDim, kPoison);
        std::vector<float> got(kRows * kDim);
        out.write(poison.data(), poison.size() * 4);
        cl.submit_and_wait();
        out.read(got.data(), got.size() * 4);
        for (size_t i = 0; i < want_from; ++i) ASSERT_EQ(got[i], 1.0f) << i;
        for (size_t i = want_to; i < got.size(); ++i) ASSERT_TRUE(std::isnan(got[i])) << i;
    }
};

// One recording of a chunk's fill, submitted for 3 tokens, then for all 40: the short chunk
// writes its rows and, through the indirect counts, no workgroup past the ones that cover them
// (on the default device and on the CPU backend).
static void check_chunk_counts(const std::shared_ptr<Device>& dev) {
    ChunkFill f(dev, false);
    f.t.set_tokens(3);
    f.run(3 * ChunkFill::kDim, ChunkFill::covering(3));  // 4 groups
    f.t.set_tokens(uint32_t(ChunkFill::kRows));
    f.run(ChunkFill::kRows * ChunkFill::kDim, ChunkFill::kRows * ChunkFill::kDim);
    EXPECT_THROW(f.t.set_tokens(0), Error);
}

TEST_F(DispatchTableTest, ChunkDispatchesRunTheirTokensWorkgroups) {
    for (const auto& dev : {device(), cpu_device()}) check_chunk_counts(dev);
}

// A command whose counts follow a batched step's untiled rows (ChunkRows::untiled, as the
// decode rows' split attention): the tokens until set_step, then the untiled rows,
// none at all for a step whose rows are all in query tiles.
TEST_F(DispatchTableTest, UntiledCommandsFollowTheUntiledRows) {
    ChunkFill f(device(), true);
    const size_t all = ChunkFill::kRows * ChunkFill::kDim;
    f.t.set_tokens(uint32_t(ChunkFill::kRows));
    f.run(all, all);  // no untiled count yet: the tokens'
    f.t.set_step(uint32_t(ChunkFill::kRows), 0, 3);
    f.run(ChunkFill::covering(3), ChunkFill::covering(3));  // 4 groups, as 3 tokens would run
    f.t.set_step(uint32_t(ChunkFill::kRows), 0, 0);
    f.run(0, 0);
}

// Commands inserted before others (insert_at) run where they stand in the table, with the
// workgroup counts of their own chunk axis: three fills of different lengths, the second
// inserted between the others, each cover their whole buffer for a whole chunk and only the
// first tokens' rows for a short one.
TEST_F(DispatchTableTest, InsertedCommandsKeepTheirOwnCounts) {
    auto dev = device();
    const uint32_t rows = 40;
    const size_t dims[3] = {300, 10, 1000};  // per row: the first fill, the inserted one, the last
    std::vector<Buffer> out;
    for (size_t d : dims) out.push_back(dev->allocate(rows * d * 4));
    DispatchTable t(*dev);
    t.set_chunk_rows(rows);
    kernels::fill(t, out[0], DType::kF32, rows * dims[0], 1.0f);
    kernels::fill(t, out[2], DType::kF32, rows * dims[2], 3.0f);
    t.insert_at(1);
    kernels::fill(t, out[1], DType::kF32, rows * dims[1], 2.0f);
    t.end_insert();
    t.set_chunk_rows(0);
    ASSERT_EQ(t.commands().size(), 3u);
    EXPECT_EQ(t.commands()[1].bindings[0].buffer, &out[1]);
    EXPECT_THROW(t.insert_at(4), Error);
    CommandList cl(dev);
    cl.begin();
    t.record(cl);
    cl.end();
    for (const uint32_t tokens : {3u, rows}) {
        for (size_t i = 0; i < 3; ++i) {
            const std::vector<float> poison(rows * dims[i], kPoison);
            out[i].write(poison.data(), poison.size() * 4);
        }
        t.set_tokens(tokens);
        cl.submit_and_wait();
        for (size_t i = 0; i < 3; ++i) {
            std::vector<float> got(rows * dims[i]);
            out[i].read(got.data(), got.size() * 4);
            for (size_t e = 0; e < tokens * dims[i]; ++e)
                ASSERT_EQ(got[e], float(i + 1)) << "fill " << i << ", " << tokens << " tokens, " << e;
        }
    }
}

// A projection's GEMMs for short and for long chunks write the same rows of Y; their row windows
// do not meet, so only one has workgroups for any chunk, and the recording puts no barrier
// between them. Each chunk length gets its own GEMM's product (the long one multiplies 2 W).
TEST_F(DispatchTableTest, GemmsOfDisjointRowWindowsShareABarrierInterval) {
    auto dev = device();
    const size_t rows = 40, n = 24, k = 32;
    const uint32_t split = 9;  // chunks of 1..8 tokens take the first GEMM, 9.. the second
    std::vector<float> w = random_floats(n * k, 1), x = random_floats(rows * k, 2), w2(w);
    for (float& v : w2) v *= 2.0f;
    Buffer wb = dev->allocate(w.size() * 4), w2b = dev->allocate(w.size() * 4), xb = dev->allocate(x.size() * 4);
    Buffer yb = dev->allocate(rows * n * 4), step = dev->allocate(sizeof(StepState));
    wb.write(w.data(), w.size() * 4);
    w2b.write(w2.data(), w2.size() * 4);
    xb.write(x.data(), x.size() * 4);
    DispatchTable t(*dev);
    t.set_chunk_rows(uint32_t(rows));
    // The scalar GEMM on every device: f32 throughout, so that the tolerance below holds.
    kernels::gemm(t, wb, TensorType::F32, xb, yb, {rows, n, k, k, n, 0, split}, step, false, false);
    kernels::gemm(t, w2b, TensorType::F32, xb, yb, {rows, n, k, k, n, split, 0}, step, false, false);
    t.set_chunk_rows(0);
    CommandList cl(dev);
    cl.begin();
    t.record(cl);
    cl.end();
    EXPECT_EQ(cl.barrier_count(), 0u);

    std::vector<float> got(rows * n);
    const std::vector<float> poison(rows * n, kPoison);
    for (uint32_t tokens : {5u, split - 1, split, uint32_t(rows)}) {
        const StepState state{0, 0, tokens, 0};
        step.write(&state, sizeof(state));
        yb.write(poison.data(), poison.size() * 4);
        t.set_tokens(tokens);
        cl.submit_and_wait();
        yb.read(got.data(), got.size() * 4);
        const float scale = tokens < split ? 1.0f : 2.0f;
        for (size_t i = 0; i < tokens; ++i)
            for (size_t j = 0; j < n; ++j) {
                double want = 0;
                for (size_t c = 0; c < k; ++c) want += double(x[i * k + c]) * w[j * k + c];
                ASSERT_NEAR(got[i * n + j], scale * want, 1e-4 * std::sqrt(double(k)))
                    << tokens << " tokens, " << i << ", " << j;
            }
    }
}

// A command whose groups along y cover cache positions in blocks of 256 (as a decode step's
// attention): set_position(pos) runs pos / 256 + 1 rows of groups of its 4 x 8 grid.
static void check_position_counts(const std::shared_ptr<Device>& dev) {
    const uint32_t per_group = 256, gx = 4, gy = 8, n = gx * gy * per_group;
    Buffer out = dev->allocate(size_t(n) * 4);
    DispatchTable t(*dev);
    DispatchCmd cmd;
    cmd.pipeline = &dev->pipeline("fill_f32");
    cmd.bindings = {Binding(out)};
    const FillParams p{n, 2.0f, 0};
    cmd.params.assign(reinterpret_cast<const uint8_t*>(&p), reinterpret_cast<const uint8_t*>(&p) + sizeof p);
    cmd.groups[0] = gx;
    cmd.groups[1] = gy;
    cmd.position_block = 256;
    t.dispatch(cmd);
    CommandList cl(dev);
    cl.begin();
    t.record(cl);
    cl.end();
    const std::vector<float> poison(n, kPoison);
    std::vector<float> got(n);
    for (const uint32_t pos : {0u, 255u, 256u, 1000u, 99999u}) {
        const uint32_t rows = std::min(pos / 256 + 1, gy), written = rows * gx * per_group;
        out.write(poison.data(), poison.size() * 4);
        t.set_position(pos);
        cl.submit_and_wait();
        out.read(got.data(), got.size() * 4);
        for (uint32_t i = 0; i < written; ++i) ASSERT_EQ(got[i], 2.0f) << pos << " " << i;
        for (uint32_t i = written; i < n; ++i) ASSERT_TRUE(std::isnan(got[i])) << pos << " " << i;
    }
}

TEST_F(DispatchTableTest, StepDispatchesRunTheCachedPositionsWorkgroups) {
    for (const auto& dev : {device(), cpu_device()}) check_position_counts(dev);
}

}  // namespace akunu::test
